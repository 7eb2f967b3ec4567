//! The writes of OpenStack's services (Keystone, Nova, Neutron, Cinder, Octavia) the body
//! properties run against, with their fixtures.

use super::*;

pub(super) fn targets(h: &Harness) -> Vec<Target> {
    let nets = h.get("/network/v2.0/networks");
    let net_id = |name: &str| {
        nets["networks"]
            .as_array()
            .and_then(|a| a.iter().find(|n| n["name"] == name))
            .and_then(|n| n["id"].as_str())
            .expect("seeded network")
            .to_owned()
    };
    let (private, public) = (net_id("private"), net_id("public"));
    let project = h.cloud.store.read(|r| {
        use crate::store::Read as _;
        r.list::<Value>("projects")[0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    let users = h.cloud.store.read(|r| {
        use crate::store::Read as _;
        r.list::<Value>("users")[0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    let server = h.create(
        "/compute/v2.1/servers",
        json!({"server": {"name": "fixture", "flavorRef": "2"}}),
        "server",
    );
    let subnet = h.create(
        "/network/v2.0/subnets",
        json!({"subnet": {"network_id": private, "cidr": "10.77.0.0/24", "ip_version": 4, "name": "fx"}}),
        "subnet",
    );
    let port = h.create(
        "/network/v2.0/ports",
        json!({"port": {"network_id": private, "name": "fx"}}),
        "port",
    );
    let router = h.create(
        "/network/v2.0/routers",
        json!({"router": {"name": "fx"}}),
        "router",
    );
    let fip = h.create(
        "/network/v2.0/floatingips",
        json!({"floatingip": {"floating_network_id": public}}),
        "floatingip",
    );
    let volumes = format!("/volume/v3/{project}/volumes");
    let volume = h.create(&volumes, json!({"volume": {"size": 1}}), "volume");
    let lbaas = "/load-balancer/v2/lbaas";
    let lb = h.create(
        &format!("{lbaas}/loadbalancers"),
        json!({"loadbalancer": {"vip_network_id": "n"}}),
        "loadbalancer",
    );
    let listener = h.create(
        &format!("{lbaas}/listeners"),
        json!({"listener": {"loadbalancer_id": lb, "protocol": "TCP", "protocol_port": 80}}),
        "listener",
    );
    let pool = h.create(
        &format!("{lbaas}/pools"),
        json!({"pool": {"listener_id": listener, "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}}),
        "pool",
    );
    let pool2 = h.create(
        &format!("{lbaas}/pools"),
        json!({"pool": {"loadbalancer_id": lb, "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}}),
        "pool",
    );
    let member = h.create(
        &format!("{lbaas}/pools/{pool}/members"),
        json!({"member": {"address": "127.0.0.1", "protocol_port": 9000}}),
        "member",
    );
    let monitor = h.create(
        &format!("{lbaas}/healthmonitors"),
        json!({"healthmonitor": {"pool_id": pool, "type": "TCP", "delay": 5, "timeout": 3, "max_retries": 3}}),
        "healthmonitor",
    );
    let sg = h.create(
        "/network/v2.0/security-groups",
        json!({"security_group": {"name": "fx"}}),
        "security_group",
    );
    let t = |name, method, path: String, body| Target {
        name,
        method,
        path,
        body,
        wrapped: true,
    };
    let (post, put) = (Method::POST, Method::PUT);
    let mut all = vec![
        t(
            "compute server stop",
            post.clone(),
            format!("/compute/v2.1/servers/{server}/action"),
            json!({"os-stop": null}),
        ),
        t(
            "compute volume attach",
            post.clone(),
            format!("/compute/v2.1/servers/{server}/os-volume_attachments"),
            json!({"volumeAttachment": {"volumeId": volume}}),
        ),
        t(
            "router add interface",
            put.clone(),
            format!("/network/v2.0/routers/{router}/add_router_interface"),
            json!({"subnet_id": subnet}),
        ),
        t(
            "router extra routes",
            put.clone(),
            format!("/network/v2.0/routers/{router}/add_extraroutes"),
            json!({"router": {"routes": [{"destination": "10.99.0.0/24", "nexthop": "10.77.0.9"}]}}),
        ),
        t(
            "security group create",
            post.clone(),
            "/network/v2.0/security-groups".into(),
            json!({"security_group": {"name": "g", "description": "d", "stateful": true}}),
        ),
        t(
            "security group update",
            put.clone(),
            format!("/network/v2.0/security-groups/{sg}"),
            json!({"security_group": {"name": "fx", "description": "d2"}}),
        ),
        t(
            "security group rule create",
            post.clone(),
            "/network/v2.0/security-group-rules".into(),
            json!({"security_group_rule": {"security_group_id": sg, "direction": "ingress",
                "ethertype": "IPv4", "protocol": "tcp", "port_range_min": 80, "port_range_max": 90,
                "remote_ip_prefix": "10.0.0.0/8", "description": "d"}}),
        ),
    ];
    all.extend(gce_targets(h));
    all.extend(vec![
        t(
            "identity token",
            post.clone(),
            "/identity/v3/auth/tokens".into(),
            json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
                "name": "admin", "domain": {"name": "Default"}, "password": crate::defaults::PASSWORD}}},
                "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}}),
        ),
        t(
            "identity application credential",
            post.clone(),
            format!("/identity/v3/users/{users}/application_credentials"),
            json!({"application_credential": {"name": "ac", "description": "d"}}),
        ),
        t(
            "compute server create",
            post.clone(),
            "/compute/v2.1/servers".into(),
            json!({"server": {"name": "s", "flavorRef": "2", "availability_zone": "nova",
                "metadata": {"k": "v"}, "networks": [{"uuid": private}]}}),
        ),
        t(
            "compute server update",
            put.clone(),
            format!("/compute/v2.1/servers/{server}"),
            json!({"server": {"name": "s2", "description": "d"}}),
        ),
        t(
            "compute server action",
            post.clone(),
            format!("/compute/v2.1/servers/{server}/action"),
            json!({"reboot": {"type": "SOFT"}}),
        ),
        t(
            "network create",
            post.clone(),
            "/network/v2.0/networks".into(),
            json!({"network": {"name": "n", "admin_state_up": true, "mtu": 1400, "shared": false}}),
        ),
        t(
            "network update",
            put.clone(),
            format!("/network/v2.0/networks/{private}"),
            json!({"network": {"name": "private", "mtu": 1450, "description": "d"}}),
        ),
        t(
            "subnet create",
            post.clone(),
            "/network/v2.0/subnets".into(),
            json!({"subnet": {"network_id": private, "cidr": "10.88.0.0/24", "ip_version": 4,
                "name": "s", "gateway_ip": "10.88.0.1", "enable_dhcp": true,
                "allocation_pools": [{"start": "10.88.0.10", "end": "10.88.0.200"}],
                "dns_nameservers": ["10.0.0.53"], "host_routes": []}}),
        ),
        t(
            "subnet update",
            put.clone(),
            format!("/network/v2.0/subnets/{subnet}"),
            json!({"subnet": {"name": "s2", "dns_nameservers": ["10.0.0.54"], "enable_dhcp": false}}),
        ),
        t(
            "port create",
            post.clone(),
            "/network/v2.0/ports".into(),
            json!({"port": {"network_id": private, "name": "p", "admin_state_up": true,
                "fixed_ips": [{"subnet_id": subnet}], "device_owner": ""}}),
        ),
        t(
            "port update",
            put.clone(),
            format!("/network/v2.0/ports/{port}"),
            json!({"port": {"name": "p2", "admin_state_up": false, "description": "d"}}),
        ),
        t(
            "router create",
            post.clone(),
            "/network/v2.0/routers".into(),
            json!({"router": {"name": "r", "admin_state_up": true,
                "external_gateway_info": {"network_id": public}}}),
        ),
        t(
            "router update",
            put.clone(),
            format!("/network/v2.0/routers/{router}"),
            json!({"router": {"name": "r2", "admin_state_up": true, "description": "d"}}),
        ),
        t(
            "floating ip create",
            post.clone(),
            "/network/v2.0/floatingips".into(),
            json!({"floatingip": {"floating_network_id": public, "description": "d"}}),
        ),
        t(
            "floating ip update",
            put.clone(),
            format!("/network/v2.0/floatingips/{fip}"),
            json!({"floatingip": {"port_id": null, "description": "d"}}),
        ),
        t(
            "volume create",
            post.clone(),
            volumes.clone(),
            json!({"volume": {"size": 1, "name": "v", "availability_zone": "nova", "metadata": {"a": "b"}}}),
        ),
        t(
            "volume update",
            put.clone(),
            format!("{volumes}/{volume}"),
            json!({"volume": {"name": "v2", "description": "d"}}),
        ),
        t(
            "volume extend",
            post.clone(),
            format!("{volumes}/{volume}/action"),
            json!({"os-extend": {"new_size": 2}}),
        ),
        t(
            "load balancer create",
            post.clone(),
            format!("{lbaas}/loadbalancers"),
            json!({"loadbalancer": {"name": "lb", "vip_subnet_id": "s", "description": "d",
                "admin_state_up": true, "tags": ["a"], "provider": "amphora"}}),
        ),
        t(
            "load balancer update",
            put.clone(),
            format!("{lbaas}/loadbalancers/{lb}"),
            json!({"loadbalancer": {"name": "lb2", "description": "d", "admin_state_up": true, "tags": []}}),
        ),
        t(
            "listener create",
            post.clone(),
            format!("{lbaas}/listeners"),
            json!({"listener": {"loadbalancer_id": lb, "protocol": "TCP", "protocol_port": 8000,
                "connection_limit": 100, "timeout_client_data": 1000, "timeout_member_connect": 1000,
                "timeout_member_data": 1000, "timeout_tcp_inspect": 0,
                "allowed_cidrs": ["10.0.0.0/8"], "insert_headers": {"X-Forwarded-For": "true"}}}),
        ),
        t(
            "listener update",
            put.clone(),
            format!("{lbaas}/listeners/{listener}"),
            json!({"listener": {"name": "l", "connection_limit": 10, "timeout_client_data": 5000,
                "timeout_member_data": 5000, "allowed_cidrs": null}}),
        ),
        t(
            "pool create",
            post.clone(),
            format!("{lbaas}/pools"),
            json!({"pool": {"loadbalancer_id": lb, "protocol": "TCP", "lb_algorithm": "SOURCE_IP",
                "session_persistence": {"type": "SOURCE_IP"}, "name": "p"}}),
        ),
        t(
            "pool update",
            put.clone(),
            format!("{lbaas}/pools/{pool2}"),
            json!({"pool": {"lb_algorithm": "LEAST_CONNECTIONS", "name": "p2", "admin_state_up": true}}),
        ),
        t(
            "member create",
            post.clone(),
            format!("{lbaas}/pools/{pool}/members"),
            json!({"member": {"address": "127.0.0.2", "protocol_port": 9000, "weight": 5,
                "monitor_address": "127.0.0.2", "monitor_port": 9001, "backup": false}}),
        ),
        t(
            "member update",
            put.clone(),
            format!("{lbaas}/pools/{pool}/members/{member}"),
            json!({"member": {"weight": 3, "name": "m", "monitor_port": 9002, "admin_state_up": true}}),
        ),
        t(
            "member batch update",
            put.clone(),
            format!("{lbaas}/pools/{pool2}/members"),
            json!({"members": [{"address": "127.0.0.3", "protocol_port": 80, "weight": 1}]}),
        ),
        t(
            "health monitor create",
            post.clone(),
            format!("{lbaas}/healthmonitors"),
            json!({"healthmonitor": {"pool_id": pool2, "type": "HTTP", "delay": 5, "timeout": 3,
                "max_retries": 3, "max_retries_down": 3, "url_path": "/", "expected_codes": "200",
                "http_method": "GET"}}),
        ),
        t(
            "health monitor update",
            put,
            format!("{lbaas}/healthmonitors/{monitor}"),
            json!({"healthmonitor": {"delay": 10, "timeout": 5, "max_retries": 2, "name": "m"}}),
        ),
    ]);
    all
}
