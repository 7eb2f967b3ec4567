//! Instances, InstancesV2, Zones and Routes of the azure provider against the local cloud's
//! Azure dialect: VMs made through Resource Manager (node name = VM name) are found by name
//! and by provider ID, with their addresses (private, hostname, public), size and zone (the
//! fault domain in an availability set, `<location>-<n>` for a zonal VM); a deallocated VM is
//! shut down and a deleted one gone; routes go into the table named by `routeTableName`.

use hypercloud_cloudprovider::{Interface, Route};
use hypercloud_providers_azure::models::{
    IpConfiguration, NetworkInterface, PublicIpAddress, Reference, VirtualMachine, VirtualNetwork,
};
use hypercloud_providers_azure::{Arm, Azure};
use serde_json::json;

use crate::support::{Cloud, LOCATION};
use hypercloud_testenv::nodes::node;

const GROUP: &str = "rg";

/// A group, a loopback virtual network, and per name a NIC (the first with a public IP) and a
/// VM of that name; the VMs' IDs.
async fn vms(arm: &Arm, names: &[&str], zonal: bool) -> Vec<String> {
    let _: serde_json::Value = arm
        .put(
            &arm.resource_group_id(GROUP),
            &json!({"location": LOCATION}),
        )
        .await
        .unwrap();
    let vnet: VirtualNetwork = arm
        .put(
            &arm.resource_id(GROUP, "Microsoft.Network/virtualNetworks", "vnet"),
            &json!({"location": LOCATION, "properties": {
                "addressSpace": {"addressPrefixes": ["127.6.0.0/16"]},
                "subnets": [{"name": "nodes", "properties": {"addressPrefix": "127.6.1.0/24"}}]}}),
        )
        .await
        .unwrap();
    let subnet = vnet.properties.subnets[0].id.clone().unwrap();
    let set = arm.resource_id(GROUP, "Microsoft.Compute/availabilitySets", "nodes");
    if !zonal {
        let _: serde_json::Value = arm
            .put(&set, &json!({"location": LOCATION, "sku": {"name": "Aligned"}, "properties": {"platformFaultDomainCount": 2}}))
            .await
            .unwrap();
    }
    let mut ids = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut ipc = IpConfiguration {
            name: Some("ipconfig1".into()),
            ..Default::default()
        };
        ipc.properties.subnet = Some(Reference::to(&subnet));
        ipc.properties.primary = Some(true);
        if i == 0 {
            let pip: PublicIpAddress = arm
                .put(
                    &arm.resource_id(GROUP, "Microsoft.Network/publicIPAddresses", &format!("{name}-pip")),
                    &json!({"location": LOCATION, "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}),
                )
                .await
                .unwrap();
            ipc.properties.public_ip_address = Some(Reference::to(pip.id.as_deref().unwrap()));
        }
        let mut nic = NetworkInterface {
            location: Some(LOCATION.into()),
            ..Default::default()
        };
        nic.properties.ip_configurations.push(ipc);
        let nic: NetworkInterface = arm
            .put(
                &arm.resource_id(
                    GROUP,
                    "Microsoft.Network/networkInterfaces",
                    &format!("{name}-nic"),
                ),
                &nic,
            )
            .await
            .unwrap();
        let mut body = json!({"location": LOCATION, "properties": {
            "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
            "osProfile": {"computerName": name, "adminUsername": "azureuser"},
            "networkProfile": {"networkInterfaces": [{"id": nic.id.unwrap()}]}}});
        if zonal {
            body["zones"] = json!(["1"]);
        } else {
            body["properties"]["availabilitySet"] = json!({"id": set});
        }
        let vm: VirtualMachine = arm
            .put(
                &arm.resource_id(GROUP, "Microsoft.Compute/virtualMachines", name),
                &body,
            )
            .await
            .unwrap();
        ids.push(vm.id.unwrap());
    }
    ids
}

fn provider(cloud: &Cloud, extra: &str) -> Azure {
    let (config, env) = cloud.config(&cloud.azure_json("hypercloud", extra));
    Azure::with_environment(config, env, cloud.options())
}

#[tokio::test]
async fn nodes_are_their_vms_by_name_and_provider_id() {
    let cloud = Cloud::start().await;
    let arm = cloud.arm("");
    let ids = vms(&arm, &["node-1", "node-2"], false).await;
    let azure = provider(&cloud, "");
    azure.initialize(None).await.unwrap();
    let instances = azure.instances().unwrap();

    let addresses = instances.node_addresses("node-1").await.unwrap();
    let kinds: Vec<(&str, &str)> = addresses
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(kinds[0].0, "InternalIP");
    assert!(kinds[0].1.starts_with("127.6.1."), "{kinds:?}");
    assert_eq!(kinds[1], ("Hostname", "node-1"));
    assert_eq!(kinds[2].0, "ExternalIP", "{kinds:?}");
    assert_eq!(
        instances.node_addresses("node-2").await.unwrap().len(),
        2,
        "no public IP"
    );

    let id = instances.instance_id("node-1").await.unwrap();
    assert_eq!(id.to_lowercase(), ids[0].to_lowercase());
    let provider_id = format!("azure://{id}");
    assert_eq!(
        instances.instance_type("node-1").await.unwrap(),
        "Standard_D2s_v3"
    );
    assert_eq!(
        instances
            .instance_type_by_provider_id(&provider_id)
            .await
            .unwrap(),
        "Standard_D2s_v3"
    );
    assert_eq!(
        instances
            .node_addresses_by_provider_id(&provider_id)
            .await
            .unwrap(),
        addresses
    );
    assert!(instances
        .instance_exists_by_provider_id(&provider_id)
        .await
        .unwrap());
    assert!(!instances
        .instance_shutdown_by_provider_id(&provider_id)
        .await
        .unwrap());
    assert!(matches!(
        instances.node_addresses("node-9").await,
        Err(hypercloud_cloudprovider::Error::InstanceNotFound)
    ));
    assert!(instances
        .node_addresses_by_provider_id("aws:///i-1")
        .await
        .is_err());

    // Zones: the fault domain in an availability set (two domains, two VMs).
    let zones = azure.zones().unwrap();
    let z1 = zones.get_zone_by_node_name("node-1").await.unwrap();
    let z2 = zones
        .get_zone_by_provider_id(&format!("azure://{}", ids[1]))
        .await
        .unwrap();
    assert_eq!(
        (z1.region.as_str(), z2.region.as_str()),
        (LOCATION, LOCATION)
    );
    let mut domains = vec![z1.failure_domain, z2.failure_domain];
    domains.sort();
    assert_eq!(domains, ["0", "1"]);

    // InstancesV2 by the Node, with or without its provider ID.
    let v2 = azure.instances_v2().unwrap();
    let before = azure.api_calls();
    let meta = v2.instance_metadata(&node("node-1", None)).await.unwrap();
    let per_node = azure.api_calls() - before;
    // The VM (with its instance view), its primary NIC, and the NIC's public IP.
    assert_eq!(
        per_node, 3,
        "ARM requests to initialise a Node with a public IP"
    );
    eprintln!("ARM requests per Node initialised (instance_metadata, a public IP): {per_node}");
    assert_eq!(meta.provider_id.to_lowercase(), provider_id.to_lowercase());
    assert_eq!(meta.instance_type, "Standard_D2s_v3");
    assert_eq!(meta.region, LOCATION);
    assert_eq!(meta.node_addresses, addresses);

    // Deallocated: shut down; deleted: gone.
    arm.post_action(&ids[0], "deallocate").await.unwrap();
    assert!(instances
        .instance_shutdown_by_provider_id(&provider_id)
        .await
        .unwrap());
    assert!(v2
        .instance_shutdown(&node("node-1", Some(&provider_id)))
        .await
        .unwrap());
    arm.post_action(&ids[0], "start").await.unwrap();
    assert!(!v2
        .instance_shutdown(&node("node-1", Some(&provider_id)))
        .await
        .unwrap());
    arm.delete(&ids[1]).await.unwrap();
    let gone = format!("azure://{}", ids[1]);
    assert!(!instances
        .instance_exists_by_provider_id(&gone)
        .await
        .unwrap());
    assert!(!v2
        .instance_exists(&node("node-2", Some(&gone)))
        .await
        .unwrap());
    eprintln!("ARM requests for two nodes' lookups: {}", azure.api_calls());
    cloud.shutdown().await;
}

#[tokio::test]
async fn zonal_vms_are_in_location_dash_zone_and_routes_go_into_the_table() {
    let cloud = Cloud::start().await;
    let arm = cloud.arm("");
    vms(&arm, &["node-1"], true).await;
    let azure = provider(&cloud, r#", "routeTableName": "k8s-routes""#);
    let zone = azure
        .zones()
        .unwrap()
        .get_zone_by_node_name("node-1")
        .await
        .unwrap();
    assert_eq!(zone.failure_domain, format!("{LOCATION}-1"));

    let routes = azure.routes().expect("routes with a routeTableName");
    assert!(
        routes.list_routes("kubernetes").await.unwrap().is_empty(),
        "no table yet"
    );
    let route = Route {
        name: String::new(),
        target_node: "node-1".into(),
        destination_cidr: "10.244.1.0/24".into(),
        blackhole: false,
    };
    routes
        .create_route("kubernetes", "hint", &route)
        .await
        .unwrap();
    let listed = routes.list_routes("kubernetes").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].target_node.as_str()),
        ("node-1", "node-1")
    );
    assert_eq!(listed[0].destination_cidr, "10.244.1.0/24");
    let table: serde_json::Value = arm
        .get(&arm.resource_id(GROUP, "Microsoft.Network/routeTables", "k8s-routes"))
        .await
        .unwrap();
    let hop = &table["properties"]["routes"][0]["properties"];
    assert_eq!(hop["nextHopType"], "VirtualAppliance");
    assert!(
        hop["nextHopIpAddress"]
            .as_str()
            .unwrap()
            .starts_with("127.6.1."),
        "{hop}"
    );
    routes.delete_route("kubernetes", &listed[0]).await.unwrap();
    assert!(routes.list_routes("kubernetes").await.unwrap().is_empty());
    routes.delete_route("kubernetes", &listed[0]).await.unwrap();

    let missing = Route {
        target_node: "node-9".into(),
        ..route
    };
    let e = routes
        .create_route("kubernetes", "hint", &missing)
        .await
        .unwrap_err();
    assert!(format!("{e:#}").contains("node-9"), "{e:#}");
    assert!(
        provider(&cloud, "").routes().is_none(),
        "no table named: no routes"
    );
    cloud.shutdown().await;
}

/// `useInstanceMetadata`: the VM this process runs on learns its addresses, size, ID and zone
/// from the instance metadata service (asking from its NIC's address, as a VM would), with no
/// Resource Manager call; other nodes still come from Resource Manager.
#[tokio::test]
async fn the_local_vm_is_read_from_the_instance_metadata_service() {
    let cloud = Cloud::start().await;
    let arm = cloud.arm("");
    vms(&arm, &["node-1", "node-2"], false).await;
    let nic: NetworkInterface = arm
        .get(&arm.resource_id(GROUP, "Microsoft.Network/networkInterfaces", "node-1-nic"))
        .await
        .unwrap();
    let ip = nic.properties.ip_configurations[0]
        .properties
        .private_ip_address
        .clone()
        .unwrap();
    let md = cloud.handle.as_ref().unwrap().metadata_addr().unwrap();
    let azure = provider(
        &cloud,
        &format!(
            r#", "useInstanceMetadata": true, "hypercloudInstanceMetadataEndpoint": "http://{md}",
               "hypercloudInstanceMetadataSourceAddress": "{ip}""#
        ),
    );
    let instances = azure.instances().unwrap();
    let addresses = instances.node_addresses("node-1").await.unwrap();
    let kinds: Vec<(&str, &str)> = addresses
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(kinds[0], ("Hostname", "node-1"));
    assert_eq!(kinds[1], ("InternalIP", ip.as_str()));
    assert_eq!(kinds[2].0, "ExternalIP", "{kinds:?}");
    assert_eq!(
        instances.instance_type("node-1").await.unwrap(),
        "Standard_D2s_v3"
    );
    let id = instances.instance_id("node-1").await.unwrap();
    assert!(
        id.ends_with("/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/node-1"),
        "{id}"
    );
    let zone = azure.zones().unwrap().get_zone().await.unwrap();
    assert_eq!(zone.region, LOCATION);
    assert!(
        ["0", "1"].contains(&zone.failure_domain.as_str()),
        "{zone:?}"
    );
    assert_eq!(
        azure.api_calls(),
        0,
        "the local VM needs no Resource Manager call"
    );
    // Another node: Resource Manager.
    assert_eq!(instances.node_addresses("node-2").await.unwrap().len(), 2);
    assert!(azure.api_calls() > 0);

    // A source address that is no VM's: the metadata service says so, named.
    let stranger = provider(
        &cloud,
        &format!(
            r#", "useInstanceMetadata": true, "hypercloudInstanceMetadataEndpoint": "http://{md}",
               "hypercloudInstanceMetadataSourceAddress": "127.0.0.1""#
        ),
    );
    let e = stranger.zones().unwrap().get_zone().await.unwrap_err();
    assert!(format!("{e:#}").contains("metadata"), "{e:#}");
    cloud.shutdown().await;
}

/// An instance metadata service that answers garbage, an error or a huge body gets a clear
/// error naming the service, never a panic or an unbounded read.
#[tokio::test]
async fn a_hostile_instance_metadata_service_is_a_clear_error() {
    use axum::routing::get;
    let huge = "x".repeat(20 << 20);
    let router = axum::Router::new()
        .route(
            "/huge/metadata/instance",
            get(move || async move { huge.clone() }),
        )
        .route(
            "/garbage/metadata/instance",
            get(|| async { "<html>no</html>" }),
        )
        .route(
            "/nameless/metadata/instance",
            get(|| async { axum::Json(json!({"compute": {}})) }),
        )
        .route(
            "/refusing/metadata/instance",
            get(|| async {
                (
                    axum::http::StatusCode::BAD_REQUEST,
                    "Required metadata header not specified",
                )
            }),
        );
    let base = crate::support::http_server(router).await;
    let cloud = Cloud::start().await;
    for (path, want) in [
        ("huge", "limit"),
        ("garbage", "not the instance document"),
        ("nameless", "names no VM"),
        ("refusing", "HTTP 400"),
    ] {
        let azure = provider(
            &cloud,
            &format!(
                r#", "useInstanceMetadata": true, "hypercloudInstanceMetadataEndpoint": "{base}/{path}""#
            ),
        );
        let e = azure.zones().unwrap().get_zone().await.unwrap_err();
        let text = hypercloud_cloudprovider::Chain(&e).to_string();
        assert!(
            text.contains("metadata") && text.contains(want),
            "{path}: {text}"
        );
    }
    cloud.shutdown().await;
}
