//! The service load-balancer controller against the real apiserver.

use super::*;

pub(crate) fn lb_service(name: &str, class: Option<&str>) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            load_balancer_class: class.map(Into::into),
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(crate) fn ingress_ip(s: &Service) -> Option<String> {
    s.status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

#[tokio::test]
async fn service_lb_lifecycle_finalizer_status_nodes_and_foreign_class() {
    let env = TestEnv::new("service-lb").await.expect("testenv");
    let ns = env.namespace().to_string();
    let label = env.unique_name("svc");
    let node_a = env.unique_name("lb-a");
    let node_b = env.unique_name("lb-b");
    let cloud = FakeCloud::new(FakeConfig::default());
    let nodes: Api<Node> = Api::all(env.client());
    let services: Api<Service> = Api::namespaced(env.client(), &ns);
    create(&nodes, &node(&node_a, &label, vec![]), "node a").await;

    let running = start(
        env.client(),
        &cloud,
        &[names::SERVICE_LB.name],
        &[],
        scope(&label, Some(&ns)),
    );
    services
        .create(&PostParams::default(), &lb_service("web", None))
        .await
        .expect("create service");
    services
        .create(
            &PostParams::default(),
            &lb_service("other", Some("example.com/other-lb")),
        )
        .await
        .expect("create foreign service");

    let web = eventually("ingress IP", || async {
        let s = services.get("web").await.ok()?;
        ingress_ip(&s).map(|_| s)
    })
    .await;
    assert!(web
        .finalizers()
        .iter()
        .any(|f| f == wellknown::FINALIZER_LB_CLEANUP));
    assert!(ingress_ip(&web).is_some_and(|ip| ip.starts_with("192.0.2.")));
    let lbs = cloud.load_balancers();
    let lb = lbs
        .values()
        .find(|lb| lb.service == format!("{ns}/web"))
        .expect("load balancer in the cloud");
    assert_eq!(*lb.nodes, vec![node_a.clone()]);

    // A new node joins the backends of existing load balancers.
    create(&nodes, &node(&node_b, &label, vec![]), "node b").await;
    eventually("backends updated", || async {
        let lbs = cloud.load_balancers();
        let lb = lbs.values().find(|lb| lb.service == format!("{ns}/web"))?;
        (*lb.nodes == vec![node_a.clone(), node_b.clone()]).then_some(())
    })
    .await;
    assert!(cloud.call_count("update_load_balancer") >= 1);

    // Deleting the Service deletes the load balancer, then the finalizer lets it go.
    services
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete service");
    eventually("service gone", || async {
        match services.get_opt("web").await {
            Ok(None) => Some(()),
            _ => None,
        }
    })
    .await;
    assert!(cloud
        .calls()
        .iter()
        .any(|c| c.method == "ensure_load_balancer_deleted" && c.args[1] == format!("{ns}/web")));
    assert!(cloud.load_balancers().is_empty());

    // Upstream's events, in the test's namespace (recorded asynchronously: wait for them).
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client(), &ns);
    let wanted = [
        "EnsuringLoadBalancer",
        "EnsuredLoadBalancer",
        "UpdatedLoadBalancer",
        "DeletingLoadBalancer",
        "DeletedLoadBalancer",
    ];
    let reasons: Vec<String> = eventually("all service events", || async {
        let reasons: Vec<String> = events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web"))
            .filter_map(|e| e.reason)
            .collect();
        wanted
            .iter()
            .all(|w| reasons.iter().any(|r| r == w))
            .then_some(reasons)
    })
    .await;
    for r in wanted {
        assert!(reasons.iter().any(|x| x == r), "event {r} in {reasons:?}");
    }

    // The foreign-class Service was never touched.
    let other = services.get("other").await.expect("other");
    assert!(other.finalizers().is_empty());
    assert!(ingress_ip(&other).is_none());
    assert!(!cloud
        .calls()
        .iter()
        .any(|c| c.args.iter().any(|a| a == &format!("{ns}/other"))));

    running.stop().await;
    let _ = services.delete("other", &DeleteParams::default()).await;
    delete_nodes(&nodes, &[node_a, node_b]).await;
    env.cleanup().await.expect("cleanup");
}
