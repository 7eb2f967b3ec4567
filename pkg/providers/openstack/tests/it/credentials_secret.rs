//! `[Global] secret-name`: credentials from a Kubernetes Secret on the real apiserver, followed
//! while running. A rotated application credential is used by the next request (and the old
//! one can be deleted), a refused or deleted Secret keeps the last good credentials and shows
//! in the provider's health, a missing Secret stops start-up naming it, and no message quotes
//! a secret value.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use hypercloud_cloudprovider::Interface;
use hypercloud_localcloud::store::Read as _;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::Cloud;

/// Creates an application credential `name` for the admin user: (id, secret).
async fn app_credential(cloud: &Cloud, name: &str) -> (String, String) {
    let secret = format!("{name}-{}", std::process::id());
    let v = cloud
        .ok(
            Method::POST,
            &format!(
                "/identity/v3/users/{}/application_credentials",
                cloud.user_id
            ),
            Some(json!({"application_credential": {"name": name, "secret": secret}})),
        )
        .await;
    let id = v["application_credential"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    (id, secret)
}

fn clouds_conf(id: &str, secret: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(
        "clouds.conf".to_owned(),
        format!("[Global]\napplication-credential-id = {id}\napplication-credential-secret = {secret}\n"),
    )])
}

async fn put_secret(api: &Api<Secret>, name: &str, data: BTreeMap<String, String>) {
    let s = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        string_data: Some(data),
        ..Secret::default()
    };
    match api.get_opt(name).await.unwrap() {
        None => {
            api.create(&PostParams::default(), &s).await.unwrap();
        }
        Some(_) => {
            // A replacing apply: `data` keys left out are removed.
            let mut patch = serde_json::to_value(&s).unwrap();
            patch["apiVersion"] = json!("v1");
            patch["kind"] = json!("Secret");
            patch["data"] = json!({});
            api.patch(
                name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(patch),
            )
            .await
            .unwrap();
        }
    }
}

/// The application credentials Keystone issued tokens for, each once.
fn credentials_with_tokens(cloud: &Cloud) -> Vec<String> {
    let tokens: Vec<Value> = cloud.handle().store().read(|v| v.list("tokens"));
    let mut ids: Vec<String> = tokens
        .iter()
        .filter_map(|t| t["application_credential_id"].as_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids.dedup();
    ids
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

#[tokio::test]
async fn credentials_follow_a_secret_through_rotation() {
    let env = TestEnv::new("openstack-credentials-secret").await.unwrap();
    let cloud = Cloud::start().await;
    cloud.create_server("sec-node", "1", None).await;
    let (old_id, old_secret) = app_credential(&cloud, "ccm-old").await;
    let (new_id, new_secret) = app_credential(&cloud, "ccm-new").await;
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    put_secret(&secrets, "os-creds", clouds_conf(&old_id, &old_secret)).await;

    let conf = format!(
        "[Global]\nauth-url = {}/identity/v3\nregion = RegionOne\nsecret-name = os-creds\nsecret-namespace = {}\n[Hypercloud]\nserver-cache-ttl = 0s\n",
        cloud.url,
        env.namespace()
    );
    let os = cloud.provider(&conf);
    os.initialize(Some(env.client())).await.unwrap();
    assert_eq!(os.credentials_versions(), 1);
    assert_eq!(os.credentials_health(), Ok(()));
    let instances = os.instances().unwrap();
    instances.instance_type("sec-node").await.unwrap();
    assert_eq!(
        credentials_with_tokens(&cloud),
        std::slice::from_ref(&old_id)
    );

    // Rotation: the next request authenticates with the new credential, without a restart.
    put_secret(&secrets, "os-creds", clouds_conf(&new_id, &new_secret)).await;
    eventually("the rotated Secret", || os.credentials_versions() == 2).await;
    instances.instance_type("sec-node").await.unwrap();
    let mut both = vec![old_id.clone(), new_id.clone()];
    both.sort();
    assert_eq!(credentials_with_tokens(&cloud), both);
    // The old credential can go: nothing uses it any more.
    cloud
        .call(
            Method::DELETE,
            &format!(
                "/identity/v3/users/{}/application_credentials/{old_id}",
                cloud.user_id
            ),
            None,
        )
        .await;
    instances.instance_type("sec-node").await.unwrap();
    assert_eq!(os.credentials_health(), Ok(()));

    // A version the provider refuses keeps the credentials in use and shows in the health.
    put_secret(
        &secrets,
        "os-creds",
        BTreeMap::from([(
            "clouds.conf".to_owned(),
            format!(
                "[Global]\napplication-credential-id = {new_id}\nca-file = /etc/{new_secret}\n"
            ),
        )]),
    )
    .await;
    eventually("the refusal in the health", || {
        os.credentials_health().is_err()
    })
    .await;
    let why = os.credentials_health().unwrap_err();
    assert!(
        why.contains(&format!("Secret {}/os-creds", env.namespace())),
        "{why}"
    );
    assert!(
        why.contains("ca-file is not read from the credentials Secret"),
        "{why}"
    );
    assert!(!why.contains(&new_secret), "a value leaked: {why}");
    instances.instance_type("sec-node").await.unwrap();

    // Deleted: the last good credentials stay in use; the health says so.
    secrets
        .delete("os-creds", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deletion in the health", || {
        os.credentials_health()
            .is_err_and(|w| w.contains("deleted"))
    })
    .await;
    instances.instance_type("sec-node").await.unwrap();
    // Back: healthy again, on the new version.
    put_secret(&secrets, "os-creds", clouds_conf(&new_id, &new_secret)).await;
    eventually("health after the Secret is back", || {
        os.credentials_health().is_ok()
    })
    .await;

    // A component without a client of its own reads the Secret with kubeconfig-path.
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let node_side = cloud.provider(&format!("{conf}[Global]\nkubeconfig-path = {kubeconfig}\n"));
    node_side.initialize(None).await.unwrap();
    node_side
        .instances()
        .unwrap()
        .instance_type("sec-node")
        .await
        .unwrap();

    // Missing at start: start-up stops, naming the Secret.
    let absent = conf.replace("secret-name = os-creds", "secret-name = absent");
    let e = cloud
        .provider(&absent)
        .initialize(Some(env.client()))
        .await
        .unwrap_err();
    let msg = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(
        msg.contains(&format!(
            "reading the credentials Secret {}/absent",
            env.namespace()
        )),
        "{msg}"
    );
    cloud.shutdown().await;
    env.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_wrong_credential_in_the_secret_names_the_secret_not_the_value() {
    let env = TestEnv::new("openstack-credentials-wrong").await.unwrap();
    let cloud = Cloud::start().await;
    let (id, _) = app_credential(&cloud, "ccm").await;
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    put_secret(&secrets, "os-creds", clouds_conf(&id, "not-the-secret-x9")).await;
    let conf = format!(
        "[Global]\nauth-url = {}/identity/v3\nsecret-name = os-creds\nsecret-namespace = {}\n",
        cloud.url,
        env.namespace()
    );
    let e = cloud
        .provider(&conf)
        .initialize(Some(env.client()))
        .await
        .unwrap_err();
    let msg = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(msg.contains("rejected the credentials"), "{msg}");
    assert!(
        msg.contains(&format!("the Secret {}/os-creds", env.namespace())),
        "{msg}"
    );
    assert!(
        !msg.contains("not-the-secret-x9"),
        "the value leaked: {msg}"
    );
    cloud.shutdown().await;
    env.cleanup().await.unwrap();
}

/// deploy/components/credentials-secret's Role (get, list, watch on the one Secret, by name)
/// is enough to read and follow the credentials Secret, and grants no other Secret.
#[tokio::test]
async fn the_deployed_role_is_enough_to_follow_the_secret() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

    let env = TestEnv::new("openstack-credentials-rbac").await.unwrap();
    let ns = env.namespace().to_owned();
    let cloud = Cloud::start().await;
    cloud.create_server("rbac-node", "1", None).await;
    let (id, secret) = app_credential(&cloud, "ccm").await;
    let secrets: Api<Secret> = Api::namespaced(env.client(), &ns);
    let name = "hypercloud-cloud-credentials";
    put_secret(&secrets, name, clouds_conf(&id, &secret)).await;
    put_secret(&secrets, "another", clouds_conf(&id, &secret)).await;

    // The component's RBAC, moved to this test's namespace.
    let rbac = std::fs::read_to_string(
        hypercloud_testenv::repo_root().join("deploy/components/credentials-secret/rbac.yaml"),
    )
    .unwrap()
    .replace("namespace: kube-system", &format!("namespace: {ns}"));
    let mut docs = rbac.split("\n---\n");
    let role: Role = serde_yaml::from_str(docs.next().unwrap()).unwrap();
    let binding: RoleBinding = serde_yaml::from_str(docs.next().unwrap()).unwrap();
    let pp = PostParams::default();
    Api::<Role>::namespaced(env.client(), &ns)
        .create(&pp, &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(env.client(), &ns)
        .create(&pp, &binding)
        .await
        .unwrap();
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("cloud-controller-manager".into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    Api::<ServiceAccount>::namespaced(env.client(), &ns)
        .create(&pp, &sa)
        .await
        .unwrap();
    let mut config = env.control_plane().config().clone();
    config.auth_info.impersonate = Some(format!(
        "system:serviceaccount:{ns}:cloud-controller-manager"
    ));
    let as_ccm = kube::Client::try_from(config).unwrap();

    let conf = |secret_name: &str| {
        format!(
            "[Global]\nauth-url = {}/identity/v3\nsecret-name = {secret_name}\nsecret-namespace = {ns}\n",
            cloud.url
        )
    };
    let os = cloud.provider(&conf(name));
    os.initialize(Some(as_ccm.clone())).await.unwrap();
    os.instances()
        .unwrap()
        .instance_type("rbac-node")
        .await
        .unwrap();
    // The watch (list and watch by name) is allowed too: a change arrives.
    let mut changed = clouds_conf(&id, &secret);
    changed.values_mut().for_each(|v| v.push_str("; rotated\n"));
    put_secret(&secrets, name, changed).await;
    eventually("the change through the watch", || {
        os.credentials_versions() == 2
    })
    .await;
    assert_eq!(os.credentials_health(), Ok(()));
    // Any other Secret is forbidden.
    let e = cloud
        .provider(&conf("another"))
        .initialize(Some(as_ccm))
        .await
        .unwrap_err();
    let msg = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(msg.contains("forbidden"), "{msg}");
    cloud.shutdown().await;
    env.cleanup().await.unwrap();
}
