//! The election primitives against the real apiserver: one holder at a time, optimistic
//! concurrency between racing candidates, release hands over at once, transitions counted.

use std::time::Duration;

use hypercloud_leaderelection::{Config, LeaderElector, Outcome};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

fn elector(env: &hypercloud_testenv::TestEnv, lease: &str, id: &str) -> LeaderElector {
    let config = Config {
        name: lease.into(),
        namespace: env.namespace().into(),
        identity: id.into(),
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_secs(1),
        release_on_cancel: true,
    };
    LeaderElector::new(env.client(), config, None).expect("elector")
}

async fn spec(
    env: &hypercloud_testenv::TestEnv,
    lease: &str,
) -> k8s_openapi::api::coordination::v1::LeaseSpec {
    let api: Api<Lease> = Api::namespaced(env.client(), env.namespace());
    api.get(lease).await.expect("lease").spec.expect("spec")
}

#[tokio::test]
async fn one_holder_release_and_transitions() {
    let env = hypercloud_testenv::TestEnv::new("le-primitives")
        .await
        .expect("testenv");
    let a = elector(&env, "l1", "a");
    let b = elector(&env, "l1", "b");
    assert!(a.try_acquire_or_renew().await.expect("a acquires"));
    assert!(!b.try_acquire_or_renew().await.expect("b sees a"));
    assert!(a.try_acquire_or_renew().await.expect("a renews"));
    let s = spec(&env, "l1").await;
    assert_eq!(s.holder_identity.as_deref(), Some("a"));
    assert_eq!(s.lease_duration_seconds, Some(4));
    assert_eq!(s.lease_transitions, Some(0));
    // b may not release a's lease; a may.
    assert!(!b.release().await.expect("not b's"));
    assert!(a.release().await.expect("a releases"));
    let s = spec(&env, "l1").await;
    assert_eq!(s.holder_identity, None);
    assert_eq!(s.lease_duration_seconds, Some(1));
    // Released: b takes it at once and the transition is counted.
    assert!(b.try_acquire_or_renew().await.expect("b acquires"));
    let s = spec(&env, "l1").await;
    assert_eq!(s.holder_identity.as_deref(), Some("b"));
    assert_eq!(s.lease_transitions, Some(1));
    env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn racing_candidates_get_one_winner() {
    let env = hypercloud_testenv::TestEnv::new("le-race")
        .await
        .expect("testenv");
    for round in 0..5 {
        let lease = format!("race-{round}");
        let cands: Vec<LeaderElector> = (0..4)
            .map(|i| elector(&env, &lease, &format!("c{i}")))
            .collect();
        let results =
            futures::future::join_all(cands.iter().map(|c| c.try_acquire_or_renew())).await;
        let winners = results
            .into_iter()
            .map(|r| r.expect("no API error"))
            .filter(|w| *w)
            .count();
        assert_eq!(winners, 1, "round {round}");
    }
    env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn run_leads_then_releases_on_shutdown() {
    let env = hypercloud_testenv::TestEnv::new("le-run")
        .await
        .expect("testenv");
    let a = elector(&env, "l2", "a");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (led_tx, led_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        a.run(
            async {
                let _ = rx.await;
            },
            |stop| async move {
                let _ = led_tx.send(());
                stop.stopped().await;
                "stopped cleanly"
            },
        )
        .await
    });
    led_rx.await.expect("leading");
    assert_eq!(spec(&env, "l2").await.holder_identity.as_deref(), Some("a"));
    tx.send(()).expect("shutdown");
    let outcome = run.await.expect("join").expect("no error");
    assert_eq!(outcome, Outcome::Shutdown);
    assert_eq!(spec(&env, "l2").await.holder_identity, None, "released");
    env.cleanup().await.expect("cleanup");
}
