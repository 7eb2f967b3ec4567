//! Leader migration (KEP-2436) against the real kube-controller-manager: the upstream
//! kube-controller-manager (built at the apiserver's version, `--cloud-provider=external`)
//! with `--enable-leader-migration` and the shipped `deploy/components/leader-migration/kube-controller-manager.conf`,
//! and hypercloud's cloud-controller-manager with `cloud-controller-manager.conf`, share the
//! migration Lease.
//!
//! - KCM -> CCM: the upstream controller manager takes its own Lease, then the migration Lease
//!   ("leader migration: starting migrated controllers"); while it holds it the
//!   cloud-controller-manager makes no load-balancer call. Since v1.31 the upstream binary has
//!   no cloud provider, so it skips the migrated controllers ("Skipping a cloud provider
//!   controller") and Service A waits without a load balancer. Once it is stopped (it does
//!   not release its Leases on SIGTERM) the cloud-controller-manager takes the migration Lease
//!   when it expires and creates exactly one load balancer for A.
//! - CCM -> KCM (the rollback direction): a new upstream controller manager waits for the
//!   migration Lease while the cloud-controller-manager holds it, and takes it once the
//!   cloud-controller-manager stops (which releases it). Service B then gets no load balancer
//!   from anyone: upstream has no cloud part left to take the controllers back into.
//!
//! No double action on the cloud: the local cloud holds one load balancer for A and none for
//! B, and every load-balancer call in the cloud-controller-manager's trace came while it held
//! the migration Lease.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hypercloud_testenv::cluster;
use hypercloud_testenv::leases::LeaseRef;
use hypercloud_testenv::process::Proc;
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use kube::Api;
use serde_json::{json, Value};
use support::cloud::LocalCloud;
use support::trace::traced;

const MIGRATION_LEASE: &str = "cloud-provider-extraction-migration";
const TIMING: [&str; 3] = [
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];

fn shipped(file: &str) -> PathBuf {
    // Found at run time, not in the checkout the test was compiled in.
    hypercloud_testenv::repo_root()
        .join("deploy/components/leader-migration")
        .join(file)
}

fn upstream_kcm(env: &TestEnv, dir: &Path, n: usize) -> Proc {
    let run = dir.join(format!("kcm-{n}"));
    std::fs::create_dir_all(&run).unwrap();
    let mut extra: Vec<String> = vec![
        format!("--leader-elect-resource-namespace={}", env.namespace()),
        "--enable-leader-migration".into(),
        format!(
            "--leader-migration-config={}",
            shipped("kube-controller-manager.conf").display()
        ),
    ];
    extra.extend(TIMING.iter().map(|s| s.to_string()));
    cluster::kube_controller_manager(env.control_plane().kubeconfig(), &run, &extra)
}

async fn create_lb_service(env: &TestEnv, name: &str) {
    let api: Api<Service> = Api::namespaced(env.client(), env.namespace());
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "selector": {"app": name},
                 "ports": [{"name": "http", "protocol": "TCP", "port": 80}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &svc).await.unwrap();
}

/// The load-balancer calls of a trace for Services of namespace `ns`. The CCM's service
/// controller is cluster-wide, and the shared apiserver may still hold LoadBalancer Services
/// of earlier tests (a bare apiserver never finishes deleting a namespace): calls for those
/// are not this test's business.
fn lb_calls(trace: &Path, ns: &str) -> Vec<Value> {
    let prefix = format!("{ns}/");
    traced(trace)
        .into_iter()
        .filter(|r| {
            r["method"]
                .as_str()
                .is_some_and(|m| m.contains("load_balancer"))
                && r["args"]["service"]
                    .as_str()
                    .is_some_and(|s| s.starts_with(&prefix))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_kcm_and_ccm_hand_over_through_the_migration_lease() {
    let _group = hypercloud_testenv::group("leader_migration_upstream").await;
    let bin = support::process::Bin::install();
    let env = TestEnv::new("e2e-upstream-migration")
        .await
        .expect("testenv");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let ns = env.namespace().to_owned();
    let migration = LeaseRef::new(env.client(), &ns, MIGRATION_LEASE);
    let cloud = LocalCloud::start(&bin, "127.0.133.0/24", "nova");
    let conf = cloud.cloud_conf("cloud.conf", None);
    let lb_suffix = |service: &str| format!("_{ns}_{service}");

    // 1. The upstream controller manager leads both Leases.
    let mut kcm = upstream_kcm(&env, dir, 1);
    kcm.wait_for_output(
        "leader migration: starting migrated controllers",
        Duration::from_secs(90),
    );
    let kcm_id = migration
        .holder()
        .await
        .expect("the KCM holds the migration Lease");
    let kcm_main = LeaseRef::new(env.client(), &ns, "kube-controller-manager")
        .holder()
        .await;
    assert_eq!(
        kcm_main.as_ref(),
        Some(&kcm_id),
        "one identity for both Leases"
    );
    // Under the migration Lease it has nothing to run: v1.34 has no cloud part.
    kcm.wait_for_output(
        "\"Skipping a cloud provider controller\" controller=\"service-lb-controller\"",
        Duration::from_secs(30),
    );

    // 2. The cloud-controller-manager leads its own Lease and waits for the migration Lease.
    let ccm_trace = dir.join("ccm.jsonl");
    let mut cmd = bin.command("cloud-controller-manager");
    cmd.arg("--cloud-provider=local")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .arg(format!("--leader-elect-resource-namespace={ns}"))
        .args(TIMING)
        .args([
            "--controllers=service",
            "--secure-port=0",
            "--enable-leader-migration",
        ])
        .arg(format!(
            "--leader-migration-config={}",
            shipped("cloud-controller-manager.conf").display()
        ))
        .arg(format!("--trace-cloud-calls={}", ccm_trace.display()));
    let mut ccm = Proc::spawn("cloud-controller-manager", cmd, dir.join("ccm.log"));
    let ccm_id = LeaseRef::new(env.client(), &ns, "cloud-controller-manager")
        .wait_holder(
            "the CCM to lead its own Lease",
            Duration::from_secs(30),
            Duration::from_millis(100),
            |h| h.is_some(),
        )
        .await
        .0
        .unwrap();
    assert_ne!(ccm_id, kcm_id);

    create_lb_service(&env, "a").await;
    // Several retry periods: the CCM must not act while the KCM holds the migration Lease.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(migration.holder().await.as_ref(), Some(&kcm_id));
    assert_eq!(
        lb_calls(&ccm_trace, &ns),
        Vec::<Value>::new(),
        "the CCM acted without the Lease"
    );
    assert!(cloud.load_balancers(&lb_suffix("a")).is_empty());

    // 3. KCM -> CCM: stop the KCM; the CCM takes the migration Lease when it expires.
    kcm.sigterm();
    let stopped = Instant::now();
    kcm.wait_exit(Duration::from_secs(30));
    let (holder, _) = migration
        .wait_holder(
            "the CCM to take over the migration Lease",
            Duration::from_secs(30),
            Duration::from_millis(100),
            |h| h.as_ref() == Some(&ccm_id),
        )
        .await;
    assert_eq!(holder.as_ref(), Some(&ccm_id));
    let took_over = stopped.elapsed();
    eventually("a load balancer for a", Duration::from_secs(60), || {
        let found = cloud.load_balancers(&lb_suffix("a")).len();
        async move { (found > 0).then_some(()) }
    })
    .await;
    assert_eq!(
        cloud.load_balancers(&lb_suffix("a")).len(),
        1,
        "one load balancer for a"
    );
    eprintln!("the CCM took the migration Lease {took_over:?} after the KCM's SIGTERM");

    // 4. CCM -> KCM: a new upstream controller manager waits while the CCM holds the Lease...
    let mut kcm2 = upstream_kcm(&env, dir, 2);
    kcm2.wait_for_output(
        "leader migration: starting main controllers",
        Duration::from_secs(90),
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(migration.holder().await.as_ref(), Some(&ccm_id));
    assert!(!kcm2.log().contains("starting migrated controllers"));
    // ...and takes it once the CCM stops (the CCM releases it).
    ccm.sigterm();
    assert_eq!(ccm.wait_exit(Duration::from_secs(30)), Some(0));
    let ccm_calls = lb_calls(&ccm_trace, &ns);
    kcm2.wait_for_output(
        "leader migration: starting migrated controllers",
        Duration::from_secs(30),
    );
    let kcm2_id = migration
        .holder()
        .await
        .expect("the new KCM holds the migration Lease");
    assert_ne!(kcm2_id, ccm_id);

    create_lb_service(&env, "b").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    // No double action: one load balancer for a, none for b, and the CCM's calls were all for a.
    assert_eq!(cloud.load_balancers(&lb_suffix("a")).len(), 1);
    assert!(cloud.load_balancers(&lb_suffix("b")).is_empty());
    assert!(!ccm_calls.is_empty());
    for call in &ccm_calls {
        assert_eq!(call["args"]["service"], format!("{ns}/a"), "{call}");
    }
    assert_eq!(
        lb_calls(&ccm_trace, &ns).len(),
        ccm_calls.len(),
        "the CCM called after it stopped"
    );
    assert!(kcm2.running(), "the upstream KCM exited");

    env.cleanup().await.unwrap();
}
