//! Network v2.0 over HTTP: networks, subnets, ports, routers with extra routes, floating IPs,
//! filters, pagination and Neutron's errors.
#![allow(clippy::unwrap_used)]

use crate::support;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use support::{assert_neutron_error, find, TestCloud};

#[tokio::test]
async fn seeded_like_devstack() {
    let cloud = TestCloud::start().await;
    let r = cloud.raw(Method::GET, "/network/", None, None).await;
    assert_eq!(r.body["versions"][0]["id"], "v2.0");
    let nets = cloud.get("/network/v2.0/networks").await.body["networks"].clone();
    let private = find(&nets, "name", "private");
    let public = find(&nets, "name", "public");
    assert_eq!(private["router:external"], false);
    assert_eq!(public["router:external"], true);
    let subnet = cloud
        .get(&format!(
            "/network/v2.0/subnets/{}",
            private["subnets"][0].as_str().unwrap()
        ))
        .await;
    assert_eq!(subnet.body["subnet"]["cidr"], "127.1.0.0/16");
    assert_eq!(subnet.body["subnet"]["gateway_ip"], "127.1.0.1");
    let routers = cloud.get("/network/v2.0/routers?name=router1").await;
    let router = &routers.body["routers"][0];
    assert_eq!(router["external_gateway_info"]["network_id"], public["id"]);
    let ifaces = cloud
        .get(&format!(
            "/network/v2.0/ports?device_id={}&device_owner=network:router_interface",
            router["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        ifaces.body["ports"][0]["fixed_ips"][0]["ip_address"],
        "127.1.0.1"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn networks_subnets_ports_crud_with_ip_allocation() {
    let cloud = TestCloud::start().await;
    let r = cloud
        .neutron_create("network", json!({"name": "blue"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let net = r.id("network");
    let r = cloud.neutron_create("subnet", json!({"network_id": net, "cidr": "192.168.5.0/29", "ip_version": 4, "name": "blue-sub"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let subnet = r.id("subnet");
    assert_eq!(
        r.body["subnet"]["allocation_pools"],
        json!([{"start": "192.168.5.2", "end": "192.168.5.6"}])
    );
    let overlap = cloud
        .neutron_create(
            "subnet",
            json!({"network_id": net, "cidr": "192.168.5.0/24", "ip_version": 4}),
        )
        .await;
    assert_eq!(overlap.status, StatusCode::BAD_REQUEST);

    let mut ips = Vec::new();
    for _ in 0..5 {
        let r = cloud
            .neutron_create("port", json!({"network_id": net}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        ips.push(
            r.body["port"]["fixed_ips"][0]["ip_address"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(
        ips,
        [
            "192.168.5.2",
            "192.168.5.3",
            "192.168.5.4",
            "192.168.5.5",
            "192.168.5.6"
        ]
    );
    let full = cloud
        .neutron_create("port", json!({"network_id": net}))
        .await;
    assert_neutron_error(&full, StatusCode::CONFLICT, "IpAddressGenerationFailure");
    let taken = cloud
        .neutron_create(
            "port",
            json!({"network_id": net, "fixed_ips": [{"ip_address": "192.168.5.3"}]}),
        )
        .await;
    assert_neutron_error(&taken, StatusCode::CONFLICT, "IpAddressAlreadyAllocated");

    let by_ip = cloud
        .get("/network/v2.0/ports?fixed_ips=ip_address%3D192.168.5.4")
        .await;
    assert_eq!(by_ip.count("ports"), 1);
    let port = by_ip.body["ports"][0]["id"].as_str().unwrap().to_owned();
    let r = cloud
        .put(
            &format!("/network/v2.0/ports/{port}"),
            json!({"port": {"name": "renamed", "device_id": "x"}}),
        )
        .await;
    assert_eq!(r.body["port"]["name"], "renamed");
    assert_eq!(r.body["port"]["revision_number"], 2);
    let fields = cloud
        .get(&format!("/network/v2.0/ports/{port}?fields=id&fields=name"))
        .await;
    assert_eq!(fields.body["port"].as_object().unwrap().len(), 2);

    let in_use = cloud.delete(&format!("/network/v2.0/networks/{net}")).await;
    assert_neutron_error(&in_use, StatusCode::CONFLICT, "NetworkInUse");
    assert_eq!(
        cloud
            .delete(&format!("/network/v2.0/subnets/{subnet}"))
            .await
            .status,
        StatusCode::CONFLICT
    );
    for p in cloud
        .get(&format!("/network/v2.0/ports?network_id={net}"))
        .await
        .body["ports"]
        .as_array()
        .unwrap()
    {
        assert_eq!(
            cloud
                .delete(&format!(
                    "/network/v2.0/ports/{}",
                    p["id"].as_str().unwrap()
                ))
                .await
                .status,
            StatusCode::NO_CONTENT
        );
    }
    assert_eq!(
        cloud
            .delete(&format!("/network/v2.0/networks/{net}"))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        cloud
            .get(&format!("/network/v2.0/subnets/{subnet}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let gone = cloud.get(&format!("/network/v2.0/networks/{net}")).await;
    assert_neutron_error(&gone, StatusCode::NOT_FOUND, "NetworkNotFound");
    cloud.shutdown().await;
}

#[tokio::test]
async fn routers_extra_routes_add_remove_and_replace() {
    let cloud = TestCloud::start().await;
    let router = cloud.neutron_id("routers", "router1").await;
    let base = format!("/network/v2.0/routers/{router}");
    // `add_extraroutes` or `remove_extraroutes` with these routes.
    let extraroutes = async |op: &str, routes: Value| {
        cloud
            .put(
                &format!("{base}/{op}"),
                json!({"router": {"routes": routes}}),
            )
            .await
    };
    let r = extraroutes(
        "add_extraroutes",
        json!([
            {"destination": "10.244.1.0/24", "nexthop": "127.1.0.11"},
            {"destination": "10.244.2.0/24", "nexthop": "127.1.0.12"}]),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["router"]["routes"].as_array().unwrap().len(), 2);
    // Adding again is idempotent; removing takes out only what is named.
    let first = json!([{"destination": "10.244.1.0/24", "nexthop": "127.1.0.11"}]);
    let r = extraroutes("add_extraroutes", first.clone()).await;
    assert_eq!(r.body["router"]["routes"].as_array().unwrap().len(), 2);
    let r = extraroutes("remove_extraroutes", first).await;
    assert_eq!(
        r.body["router"]["routes"],
        json!([{"destination": "10.244.2.0/24", "nexthop": "127.1.0.12"}])
    );
    // A nexthop the router cannot reach is rejected and changes nothing.
    let bad = extraroutes(
        "add_extraroutes",
        json!([{"destination": "10.244.3.0/24", "nexthop": "192.168.99.1"}]),
    )
    .await;
    assert_neutron_error(&bad, StatusCode::BAD_REQUEST, "InvalidRoutes");
    let bad = extraroutes(
        "add_extraroutes",
        json!([{"destination": "nonsense", "nexthop": "127.1.0.5"}]),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        cloud.get(&base).await.body["router"]["routes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // A plain update replaces the whole list.
    let r = cloud.put(&base, json!({"router": {"routes": [{"destination": "10.244.9.0/24", "nexthop": "127.1.0.19"}], "name": "router1"}})).await;
    assert_eq!(
        r.body["router"]["routes"],
        json!([{"destination": "10.244.9.0/24", "nexthop": "127.1.0.19"}])
    );
    let r = cloud.put(&base, json!({"router": {"routes": []}})).await;
    assert_eq!(r.body["router"]["routes"], json!([]));
    let r = cloud.put(&base, json!({"router": {"colour": "red"}})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.body["NeutronError"]["message"]
            .as_str()
            .unwrap()
            .contains("Unrecognized attribute"),
        "{}",
        r.body
    );
    assert_eq!(
        cloud
            .put(
                "/network/v2.0/routers/nope/add_extraroutes",
                json!({"router": {"routes": []}})
            )
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn router_interfaces_and_deletion_rules() {
    let cloud = TestCloud::start().await;
    let net = cloud
        .neutron_create("network", json!({"name": "green"}))
        .await
        .id("network");
    let sub = cloud
        .neutron_create(
            "subnet",
            json!({"network_id": net, "cidr": "172.16.0.0/24", "ip_version": 4}),
        )
        .await
        .id("subnet");
    let public = cloud.network_id("public").await;
    let r = cloud
        .neutron_create(
            "router",
            json!({"name": "r2", "external_gateway_info": {"network_id": public}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let router = r.id("router");
    let base = format!("/network/v2.0/routers/{router}");
    // `add_router_interface` or `remove_router_interface` for the subnet.
    let interface = async |op: &str| {
        cloud
            .put(&format!("{base}/{op}"), json!({"subnet_id": sub}))
            .await
    };
    let r = interface("add_router_interface").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["subnet_id"], sub.as_str());
    assert_eq!(
        interface("add_router_interface").await.status,
        StatusCode::BAD_REQUEST
    );
    cloud.put(&format!("{base}/add_extraroutes"), json!({"router": {"routes": [{"destination": "10.9.0.0/16", "nexthop": "172.16.0.50"}]}})).await;
    let blocked = interface("remove_router_interface").await;
    assert_eq!(blocked.status, StatusCode::CONFLICT);
    assert_eq!(cloud.delete(&base).await.status, StatusCode::CONFLICT);
    cloud.put(&base, json!({"router": {"routes": []}})).await;
    assert_eq!(
        interface("remove_router_interface").await.status,
        StatusCode::OK
    );
    assert_eq!(cloud.delete(&base).await.status, StatusCode::NO_CONTENT);
    let private_gw = cloud
        .neutron_create(
            "router",
            json!({"name": "r3", "external_gateway_info": {"network_id": net}}),
        )
        .await;
    assert_eq!(
        private_gw.status,
        StatusCode::BAD_REQUEST,
        "gateway on a non-external network"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn floating_ips_associate_and_show_in_server_addresses() {
    let cloud = TestCloud::start().await;
    let server = cloud.create_server("web", json!({})).await;
    let port = cloud
        .get(&format!("/network/v2.0/ports?device_id={server}"))
        .await
        .first_id("ports");
    let public = cloud.network_id("public").await;
    let on_port = json!({"floating_network_id": public, "port_id": port});
    let r = cloud.neutron_create("floatingip", on_port.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let fip = r.body["floatingip"].clone();
    assert_eq!(fip["status"], "ACTIVE");
    assert!(fip["router_id"].is_string());
    let addr = fip["floating_ip_address"].as_str().unwrap().to_owned();
    assert!(addr.starts_with("127.24.4."), "{addr}");
    let s = cloud.get(&format!("/compute/v2.1/servers/{server}")).await;
    let addrs = s.body["server"]["addresses"]["private"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        addrs
            .iter()
            .any(|a| a["addr"] == addr.as_str() && a["OS-EXT-IPS:type"] == "floating"),
        "{addrs:?}"
    );

    let second = cloud.neutron_create("floatingip", on_port).await;
    assert_eq!(second.status, StatusCode::CONFLICT);
    let private = cloud.network_id("private").await;
    let not_external = cloud
        .neutron_create("floatingip", json!({"floating_network_id": private}))
        .await;
    assert_eq!(not_external.status, StatusCode::BAD_REQUEST);

    let id = fip["id"].as_str().unwrap();
    let r = cloud.set_floating_ip_port(id, Value::Null).await;
    assert_eq!(r.body["floatingip"]["status"], "DOWN");
    assert_eq!(r.body["floatingip"]["port_id"], json!(null));
    let r = cloud.set_floating_ip_port(id, json!(port)).await;
    assert_eq!(r.body["floatingip"]["fixed_ip_address"], "127.1.0.2");
    // Deleting the server frees the association but keeps the floating IP.
    cloud
        .delete(&format!("/compute/v2.1/servers/{server}"))
        .await;
    let r = cloud.get(&format!("/network/v2.0/floatingips/{id}")).await;
    assert_eq!(r.body["floatingip"]["port_id"], json!(null));
    assert_eq!(
        cloud
            .delete(&format!("/network/v2.0/floatingips/{id}"))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        cloud
            .get(&format!("/network/v2.0/floatingips/{id}"))
            .await
            .body["NeutronError"]["type"],
        "FloatingIPNotFound"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn neutron_pagination_and_bad_bodies() {
    let cloud = TestCloud::start().await;
    for i in 0..5 {
        cloud
            .neutron_create("network", json!({"name": format!("n{i}")}))
            .await;
    }
    let mut seen = 0;
    let mut path = "/network/v2.0/networks?limit=3".to_owned();
    loop {
        let r = cloud.get(&path).await;
        seen += r.body["networks"].as_array().unwrap().len();
        match r.body["networks_links"][0]["href"].as_str() {
            Some(h) => path = h.strip_prefix(&cloud.url).unwrap().to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, 7);
    let before = cloud.get("/network/v2.0/networks").await.count("networks");
    let malformed = cloud
        .bytes(Method::POST, "/network/v2.0/networks", "{\"network\": ")
        .await;
    assert_neutron_error(&malformed, StatusCode::BAD_REQUEST, "HTTPBadRequest");
    let unknown = cloud
        .neutron_create("network", json!({"name": "x", "wings": 2}))
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        unknown.body["NeutronError"]["message"],
        "Unrecognized attribute(s) 'wings'"
    );
    let missing = cloud
        .neutron_create("subnet", json!({"cidr": "10.1.0.0/24", "ip_version": 4}))
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    let wrong_type = cloud
        .neutron_create("network", json!({"admin_state_up": "maybe"}))
        .await;
    assert_eq!(wrong_type.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        cloud.get("/network/v2.0/networks").await.count("networks"),
        before
    );
    cloud.shutdown().await;
}
