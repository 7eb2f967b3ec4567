//! `secret-name`/`secret-namespace`: the vCenter credentials from a Kubernetes Secret on the
//! real apiserver (`<server>.username`, `<server>.password`, as upstream's credential manager
//! reads them), followed while running against vcsim: a changed Secret is used by the next
//! login (a wrong password then fails, naming the user and not the password; the right one
//! works again, no restart), a refused version keeps the credentials in use and shows in the
//! provider's health.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use hypercloud_cloudprovider::{Chain, CloudConfig, Interface};
use hypercloud_providers_vsphere::VSphere;
use hypercloud_testenv::vcsim::Vcsim;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

fn data(password: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("127.0.0.1.username".to_owned(), "user".to_owned()),
        ("127.0.0.1.password".to_owned(), password.to_owned()),
    ])
}

/// Creates or replaces (PUT: keys left out are gone) the Secret `vc-creds`.
async fn put(api: &Api<Secret>, data: BTreeMap<String, String>) {
    let mut s = Secret {
        metadata: ObjectMeta {
            name: Some("vc-creds".into()),
            ..ObjectMeta::default()
        },
        string_data: Some(data),
        ..Secret::default()
    };
    match api.get_opt("vc-creds").await.unwrap() {
        None => {
            api.create(&PostParams::default(), &s).await.unwrap();
        }
        Some(old) => {
            s.metadata.resource_version = old.metadata.resource_version;
            api.replace("vc-creds", &PostParams::default(), &s)
                .await
                .unwrap();
        }
    }
}

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcenter_credentials_follow_a_secret() {
    let env = TestEnv::new("vsphere-credentials-secret").await.unwrap();
    let sim = Vcsim::start(&[]);
    sim.tag_zone("/DC0/host/DC0_H0/DC0_H0", "zone-a", "/DC0", "region-1");
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    put(&secrets, data("pass")).await;
    // No user or password in the file: the global Secret has them.
    let conf = sim
        .ini_conf("")
        .replace(
            "user = \"user\"\npassword = \"pass\"\n",
            &format!(
                "secret-name = vc-creds\nsecret-namespace = {}\n",
                env.namespace()
            ),
        )
        // Every call logs in again when the credentials change; the listing cache would hide it.
        + "[Hypercloud]\ncache-ttl = 0s\n";
    assert!(!conf.contains("pass\""), "{conf}");
    let p = VSphere::from_cloud_config(Some(&CloudConfig {
        origin: "test.conf".into(),
        bytes: conf.as_bytes().to_vec(),
    }))
    .unwrap();
    p.initialize(Some(env.client())).await.unwrap();
    assert_eq!(p.credentials_versions(), 1);
    assert_eq!(p.logins(), 1);
    let zones = || async { p.zones().unwrap().get_zone_by_node_name("DC0_H0_VM0").await };
    zones().await.unwrap();

    // A rotated password is used by the next login: here a wrong one, so the call fails,
    // naming the user and not the password.
    put(&secrets, data("rotated-wrong-pw")).await;
    eventually("the rotated Secret", || p.credentials_versions() == 2).await;
    let e = zones().await.unwrap_err();
    let msg = Chain(&e).to_string();
    assert!(msg.contains("user"), "{msg}");
    assert!(
        !msg.contains("rotated-wrong-pw"),
        "the password leaked: {msg}"
    );
    assert_eq!(p.logins(), 2);
    // Back to the right one: works again, without a restart.
    put(&secrets, data("pass")).await;
    eventually("the second rotation", || p.credentials_versions() == 3).await;
    zones().await.unwrap();
    assert_eq!(p.logins(), 3);
    assert_eq!(p.credentials_health(), Ok(()));

    // A version without this vCenter's keys is refused: the credentials in use stay.
    put(
        &secrets,
        BTreeMap::from([("other.username".to_owned(), "u".to_owned())]),
    )
    .await;
    eventually("the refusal in the health", || {
        p.credentials_health().is_err()
    })
    .await;
    let why = p.credentials_health().unwrap_err();
    assert!(why.contains("has no 127.0.0.1.username"), "{why}");
    assert!(
        why.contains(&format!("Secret {}/vc-creds", env.namespace())),
        "{why}"
    );
    zones().await.unwrap();
    assert_eq!(
        p.logins(),
        3,
        "no new login: the credentials did not change"
    );

    // Missing at start: start-up stops, naming the Secret.
    let absent = conf.replace("secret-name = vc-creds", "secret-name = absent");
    let q = VSphere::from_cloud_config(Some(&CloudConfig {
        origin: "test.conf".into(),
        bytes: absent.as_bytes().to_vec(),
    }))
    .unwrap();
    let msg = Chain(&q.initialize(Some(env.client())).await.unwrap_err()).to_string();
    assert!(
        msg.contains(&format!(
            "reading the credentials Secret {}/absent",
            env.namespace()
        )),
        "{msg}"
    );
    env.cleanup().await.unwrap();
}

/// Two vCenters naming one (the global) Secret: it is followed once, each vCenter logs in with
/// its own `<server>.username`/`.password`, and a version lacking one vCenter's keys is
/// refused as a whole (the other vCenter's credentials do not change either).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_vcenters_share_one_followed_secret() {
    let env = TestEnv::new("vsphere-credentials-two-vcenters")
        .await
        .unwrap();
    let a = Vcsim::start(&[]);
    let b = Vcsim::start_on("127.0.0.2", &[]);
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    let both = |pw_b: &str| {
        let mut d = data("pass");
        d.insert("127.0.0.2.username".into(), "user".into());
        d.insert("127.0.0.2.password".into(), pw_b.into());
        d
    };
    put(&secrets, both("pass")).await;
    let conf = format!(
        "[Global]\nsecret-name = vc-creds\nsecret-namespace = {}\ninsecure-flag = 1\ndatacenters = DC0\n{}{}[Hypercloud]\ncache-ttl = 0s\n",
        env.namespace(),
        a.ini_section(),
        b.ini_section()
    );
    let p = VSphere::from_cloud_config(Some(&CloudConfig {
        origin: "test.conf".into(),
        bytes: conf.as_bytes().to_vec(),
    }))
    .unwrap();
    p.initialize(Some(env.client())).await.unwrap();
    assert_eq!(p.credentials_versions(), 1, "one Secret, followed once");
    assert_eq!(p.logins(), 2, "each vCenter logged in");

    // Only B's password changes (to a wrong one): B's next login fails, naming B.
    put(&secrets, both("wrong-for-b")).await;
    eventually("the rotated Secret", || p.credentials_versions() == 2).await;
    // A VM only B has (vcsim derives UUIDs from names: B's default VMs have A's UUIDs).
    b.govc(&[
        "vm.create",
        "-host",
        "/DC0/host/DC0_H0/DC0_H0",
        "-net",
        "VM Network",
        "-on=false",
        "only-in-b",
    ]);
    let pid_b = format!("vsphere://{}", b.vm_uuid("/DC0/vm/only-in-b"));
    let v1 = p.instances().unwrap();
    let msg = Chain(&v1.instance_exists_by_provider_id(&pid_b).await.unwrap_err()).to_string();
    assert!(msg.contains("127.0.0.2"), "{msg}");
    assert!(!msg.contains("wrong-for-b"), "the password leaked: {msg}");

    // A version without B's keys is refused as a whole: nothing is replaced, health says why.
    put(&secrets, data("pass")).await;
    eventually("the refusal in the health", || {
        p.credentials_health().is_err()
    })
    .await;
    let why = p.credentials_health().unwrap_err();
    assert!(why.contains("has no 127.0.0.2.username"), "{why}");
    assert_eq!(p.credentials_versions(), 2);
    env.cleanup().await.unwrap();
}
