//! `--use-service-account-credentials`: each controller acts as its own ServiceAccount, and
//! the real apiserver sees that identity.

use super::*;
use hypercloud_controllers::credentials::{ServiceAccountClients, NAMESPACE};
use hypercloud_controllers::Credentials;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::ServiceAccount;

fn accounts(env: &TestEnv) -> ServiceAccountClients {
    ServiceAccountClients::new(env.client(), env.control_plane().config().clone(), 20.0, 30)
}

/// The per-controller RBAC of deploy/ (what the bootstrap policy lacks), applied as a user
/// would: the controllers below run with only these grants and the bootstrap ones.
async fn apply_controller_roles(client: Client) {
    hypercloud_testenv::rbac::apply_file(
        &client,
        &hypercloud_testenv::repo_root()
            .join("deploy/components/service-account-credentials/controller-roles.yaml"),
    )
    .await;
}

/// Who the apiserver says a client is.
async fn username(client: Client) -> String {
    let review = Api::<SelfSubjectReview>::all(client)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("selfsubjectreview");
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .expect("username")
}

#[tokio::test]
async fn each_controller_authenticates_as_its_service_account_created_when_missing() {
    let env = TestEnv::new("sa-credentials").await.expect("testenv");
    let accounts = accounts(&env);
    let sas: Api<ServiceAccount> = Api::namespaced(env.client(), NAMESPACE);
    // pvl-controller is in no bootstrap policy: nothing else creates it.
    let _ = sas.delete("pvl-controller", &DeleteParams::default()).await;
    eventually("pvl-controller gone", || async {
        sas.get_opt("pvl-controller")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    // Every controller of the cloud-controller-manager.
    for controller in names::CLOUD_CONTROLLER_MANAGER.iter().map(|c| c.id) {
        let account = controller.service_account();
        let (client, _refresh) = accounts.client(account).await.expect("client");
        assert_eq!(
            username(client).await,
            format!("system:serviceaccount:kube-system:{account}"),
            "{controller}"
        );
    }
    assert!(sas.get_opt("pvl-controller").await.expect("get").is_some());
    assert_ne!(
        username(env.client()).await,
        "system:serviceaccount:kube-system:service-controller"
    );
    env.cleanup().await.expect("cleanup");
}

/// The apiserver itself checks who writes the load balancer status: a
/// ValidatingAdmissionPolicy on `services/status` of this test's namespace admits only
/// `system:serviceaccount:kube-system:service-controller`. The service controller run with
/// service-account credentials gets its status written; the process's own client is refused.
/// The cloud-node controller runs beside it as `cloud-node-controller` and initialises a
/// Node: deploy/'s RBAC grants both what they write.
#[tokio::test]
async fn the_apiserver_sees_the_service_controllers_identity() {
    let env = TestEnv::new("sa-identity").await.expect("testenv");
    let ns = env.namespace().to_string();
    let label = env.unique_name("sa");
    let policy_name = env.unique_name("lb-status-writer");
    hypercloud_testenv::rbac::admit_only(
        &env.client(),
        &policy_name,
        "services/status",
        &format!("object.metadata.namespace == '{ns}'"),
        "system:serviceaccount:kube-system:service-controller",
    )
    .await;

    // Until the policy is in force, the process's own identity can still write; wait until
    // the apiserver refuses it, naming it.
    let services: Api<Service> = Api::namespaced(env.client(), &ns);
    // A class no controller here serves: only this test writes its status.
    let probe = super::service::lb_service("probe", Some("example.com/nobody"));
    services
        .create(&PostParams::default(), &probe)
        .await
        .expect("probe");
    let admin = username(env.client()).await;
    let refusal = eventually("policy in force", || async {
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.250"}]}}});
        match services
            .patch_status("probe", &PatchParams::default(), &Patch::Merge(&status))
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains("written by") => Some(e.message),
            _ => None,
        }
    })
    .await;
    assert!(
        refusal.contains(&format!("services/status written by {admin}")),
        "{refusal}"
    );

    apply_controller_roles(env.client()).await;
    let nodes: Api<Node> = Api::all(env.client());
    let node_name = env.unique_name("sa-node");
    create(
        &nodes,
        &node(&node_name, &label, vec![uninitialized()]),
        "node",
    )
    .await;
    let cloud = FakeCloud::new(FakeConfig {
        instances: vec![instance(&node_name, "10.0.9.1")],
        ..Default::default()
    });
    let running = start_as(
        env.client(),
        Credentials::ServiceAccounts(Arc::new(accounts(&env))),
        &cloud,
        &[names::SERVICE_LB.name, names::CLOUD_NODE.name],
        &["--use-service-account-credentials=true"],
        scope(&label, Some(&ns)),
    );
    services
        .create(
            &PostParams::default(),
            &super::service::lb_service("web", None),
        )
        .await
        .expect("create service");
    let web = eventually("ingress written as service-controller", || async {
        let s = services.get("web").await.ok()?;
        super::service::ingress_ip(&s).map(|_| s)
    })
    .await;
    assert!(web
        .finalizers()
        .iter()
        .any(|f| f == wellknown::FINALIZER_LB_CLEANUP));
    eventually("node initialised as cloud-node-controller", || async {
        let n = nodes.get(&node_name).await.ok()?;
        (!has_taint(&n, wellknown::TAINT_UNINITIALIZED)).then_some(())
    })
    .await;
    running.stop().await;

    hypercloud_testenv::rbac::remove_policy(&env.client(), &policy_name).await;
    // Remove the finalizer the controller added, so the namespace can go.
    let _ = services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    delete_nodes(&nodes, &[node_name]).await;
    env.cleanup().await.expect("cleanup");
}

/// Node IPAM acts as `node-controller`, as upstream's: the apiserver's bootstrap role for it
/// is enough to patch a Node's pod CIDRs.
#[tokio::test]
async fn node_ipam_writes_pod_cidrs_as_node_controller() {
    let (env, label) = labelled_env("sa-ipam", "sa-ipam").await;
    let node_name = env.unique_name("sa-ipam-node");
    let nodes: Api<Node> = Api::all(env.client());
    create(&nodes, &node(&node_name, &label, vec![]), "node").await;
    let cloud = FakeCloud::new(FakeConfig::default());
    let running = start_as(
        env.client(),
        Credentials::ServiceAccounts(Arc::new(accounts(&env))),
        &cloud,
        &[names::NODE_IPAM.name],
        &[
            "--use-service-account-credentials=true",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.251.0.0/16",
        ],
        scope(&label, None),
    );
    let cidrs = eventually("pod CIDRs written as node-controller", || async {
        let n = nodes.get(&node_name).await.ok()?;
        n.spec.and_then(|s| s.pod_cidrs).filter(|c| !c.is_empty())
    })
    .await;
    assert_eq!(cidrs, ["10.251.0.0/24"]);
    running.stop().await;
    delete_nodes(&nodes, &[node_name]).await;
    env.cleanup().await.expect("cleanup");
}
