//! Routes as Neutron router extra routes against a real local cloud.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use hypercloud_cloudprovider::{Error, Interface, Route};
use reqwest::Method;
use serde_json::json;
use support::Cloud;

#[tokio::test]
async fn routes_are_router_extra_routes_to_the_node_address() {
    let cloud = Cloud::start().await;
    let id = cloud.create_server("node-r", "1", None).await;
    let router = cloud.router_id().await;
    assert!(
        cloud.provider_with("").routes().is_none(),
        "no router-id, no routes (as upstream)"
    );
    let os = cloud.provider_with(&format!(
        "[Route]\nrouter-id = {router}\n[Hypercloud]\nserver-cache-ttl = 0s\n"
    ));
    let routes = os.routes().unwrap();
    assert_eq!(routes.list_routes("kubernetes").await.unwrap(), vec![]);

    let ip = os
        .instances()
        .unwrap()
        .node_addresses("node-r")
        .await
        .unwrap()[0]
        .address
        .clone();
    let route = Route {
        name: String::new(),
        target_node: "node-r".into(),
        destination_cidr: "10.244.1.0/24".into(),
        blackhole: false,
    };
    routes
        .create_route("kubernetes", "uid-1", &route)
        .await
        .unwrap();
    // Idempotent.
    routes
        .create_route("kubernetes", "uid-1", &route)
        .await
        .unwrap();
    let r = cloud
        .ok(
            Method::GET,
            &format!("/network/v2.0/routers/{router}"),
            None,
        )
        .await;
    assert_eq!(
        r["router"]["routes"],
        json!([{"destination": "10.244.1.0/24", "nexthop": ip}])
    );
    let ports = cloud
        .ok(
            Method::GET,
            &format!("/network/v2.0/ports?device_id={id}"),
            None,
        )
        .await;
    assert_eq!(
        ports["ports"][0]["allowed_address_pairs"][0]["ip_address"],
        "10.244.1.0/24"
    );

    // A route to an address no server has is a blackhole named by its next hop.
    cloud
        .ok(
            Method::PUT,
            &format!("/network/v2.0/routers/{router}/add_extraroutes"),
            Some(json!({"router": {"routes": [{"destination": "10.244.9.0/24", "nexthop": "127.1.0.250"}]}})),
        )
        .await;
    let mut listed = routes.list_routes("kubernetes").await.unwrap();
    listed.sort_by(|a, b| a.destination_cidr.cmp(&b.destination_cidr));
    assert_eq!(
        listed,
        vec![
            Route {
                name: "10.244.1.0/24".into(),
                target_node: "node-r".into(),
                destination_cidr: "10.244.1.0/24".into(),
                blackhole: false
            },
            Route {
                name: "10.244.9.0/24".into(),
                target_node: "127.1.0.250".into(),
                destination_cidr: "10.244.9.0/24".into(),
                blackhole: true
            },
        ]
    );
    for r in &listed {
        routes.delete_route("kubernetes", r).await.unwrap();
    }
    assert_eq!(routes.list_routes("kubernetes").await.unwrap(), vec![]);
    let ports = cloud
        .ok(
            Method::GET,
            &format!("/network/v2.0/ports?device_id={id}"),
            None,
        )
        .await;
    assert_eq!(ports["ports"][0]["allowed_address_pairs"], json!([]));

    // A route for a node that does not exist is refused with InstanceNotFound.
    let ghost = Route {
        target_node: "ghost".into(),
        ..route.clone()
    };
    assert!(matches!(
        routes.create_route("kubernetes", "uid-2", &ghost).await,
        Err(Error::InstanceNotFound)
    ));
    // A router that does not exist is a cloud error with the 404.
    let bad = cloud.provider_with("[Route]\nrouter-id = 00000000-0000-0000-0000-000000000000\n");
    let e = bad
        .routes()
        .unwrap()
        .list_routes("kubernetes")
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Cloud {
                status: Some(404),
                ..
            }
        ),
        "{e}"
    );
    cloud.shutdown().await;
}
