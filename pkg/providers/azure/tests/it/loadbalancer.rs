//! The provider's LoadBalancer against the local cloud's Azure dialect, with real traffic
//! through its data plane: a virtual network on loopback addresses (the local cloud forwards
//! only to addresses this machine has) whose subnet has the cluster's security group, VMs
//! named as their Nodes with NICs at fixed addresses, and TCP servers on those addresses at the
//! NodePort. Floating IP is off (`azure-disable-load-balancer-floating-ip`), so the data
//! plane, a proxy, connects to the NodePort. Each test has its own VIP pool, address range and
//! frontend port, as tests of one binary run at once and each cloud's data plane binds
//! loopback addresses. The ARM requests of each Service created and deleted are printed.

use std::time::{Duration, Instant};

use hypercloud_cloudprovider::{default_load_balancer_name, LoadBalancer as _};
use hypercloud_localcloud::faults::Faults;
use hypercloud_providers_azure::models::{
    LoadBalancer, NetworkInterface, NetworkSecurityGroup, PublicIpAddress, ResourceGroup,
    VirtualMachine, VirtualNetwork,
};
use hypercloud_providers_azure::{Arm, Azure};
use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{Cloud, LOCATION};

mod faults;
mod internal;
mod refusals;

const CLUSTER: &str = "kubernetes";
const RG: &str = "rg";
const NSG: &str = "cluster-nsg";
const FLOATING_OFF: &str = "service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip";
const INTERNAL: &str = "service.beta.kubernetes.io/azure-load-balancer-internal";

/// A local cloud with a resource group, the cluster's security group and a virtual network
/// `<net>.0.0/16` (subnet `nodes`, `<net>.1.0/24`, with the group), and a provider of the
/// standard SKU for it.
struct Site {
    cloud: Cloud,
    arm: Arm,
    azure: Azure,
    net: &'static str,
    subnet: String,
}

async fn site(net: &'static str, vip_pool: &str) -> Site {
    let mut cloud = Cloud::start().await;
    cloud.config.lb_vip_pool = vip_pool.parse().unwrap();
    cloud.restart_with(Faults::default()).await;
    let arm = cloud.arm("");
    let _: ResourceGroup = arm
        .put(&arm.resource_group_id(RG), &json!({"location": LOCATION}))
        .await
        .unwrap();
    let nsg: NetworkSecurityGroup = arm
        .put(
            &arm.resource_id(RG, "Microsoft.Network/networkSecurityGroups", NSG),
            &json!({"location": LOCATION}),
        )
        .await
        .unwrap();
    let vnet: VirtualNetwork = arm
        .put(
            &arm.resource_id(RG, "Microsoft.Network/virtualNetworks", "vnet"),
            &json!({"location": LOCATION, "properties": {
                "addressSpace": {"addressPrefixes": [format!("{net}.0.0/16")]},
                "subnets": [{"name": "nodes", "properties": {"addressPrefix": format!("{net}.1.0/24"),
                    "networkSecurityGroup": {"id": nsg.id.unwrap()}}}]}}),
        )
        .await
        .unwrap();
    let subnet = vnet.properties.subnets[0].id.clone().unwrap();
    let (config, env) = cloud.config(&cloud.azure_json(
        "hypercloud",
        r#", "loadBalancerSku": "standard", "securityGroupName": "cluster-nsg",
            "vnetName": "vnet", "subnetName": "nodes", "tags": "team=web""#,
    ));
    let azure = Azure::with_environment(config, env, cloud.options());
    Site {
        cloud,
        arm,
        azure,
        net,
        subnet,
    }
}

impl Site {
    /// A VM named `name` whose NIC `<name>-nic` has `<net>.1.<host>`, and its Node.
    async fn node(&self, name: &str, host: u8) -> Node {
        let arm = &self.arm;
        let nic: NetworkInterface = arm
            .put(
                &self.nic_id(name),
                &json!({"location": LOCATION, "properties": {"ipConfigurations": [{"name": "ipconfig1",
                    "properties": {"subnet": {"id": self.subnet}, "privateIPAllocationMethod": "Static",
                    "privateIPAddress": self.ip(host), "primary": true}}]}}),
            )
            .await
            .unwrap();
        let _: VirtualMachine = arm
            .put(
                &arm.resource_id(RG, "Microsoft.Compute/virtualMachines", name),
                &json!({"location": LOCATION, "properties": {
                    "hardwareProfile": {"vmSize": "Standard_B1s"},
                    "osProfile": {"computerName": name, "adminUsername": "azureuser",
                                  "adminPassword": "Integration-Pw-1!"},
                    "storageProfile": {
                        "imageReference": {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy",
                                           "sku": "22_04-lts-gen2", "version": "latest"},
                        "osDisk": {"createOption": "FromImage"}},
                    "networkProfile": {"networkInterfaces": [{"id": nic.id.unwrap()}]}}}),
            )
            .await
            .unwrap();
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    }

    fn ip(&self, host: u8) -> String {
        format!("{}.1.{host}", self.net)
    }

    fn nic_id(&self, node: &str) -> String {
        self.arm.resource_id(
            RG,
            "Microsoft.Network/networkInterfaces",
            &format!("{node}-nic"),
        )
    }

    /// The backend pools the node's NIC names.
    async fn pools_of(&self, node: &str) -> Vec<String> {
        let nic: NetworkInterface = self.arm.get(&self.nic_id(node)).await.unwrap();
        nic.properties.ip_configurations[0]
            .properties
            .load_balancer_backend_address_pools
            .iter()
            .filter_map(|p| p.id.clone())
            .collect()
    }

    async fn lb(&self, name: &str) -> Option<LoadBalancer> {
        let id = self
            .arm
            .resource_id(RG, "Microsoft.Network/loadBalancers", name);
        match self.arm.get(&id).await {
            Ok(lb) => Some(lb),
            Err(e) if e.is_not_found() => None,
            Err(e) => panic!("{e}"),
        }
    }

    async fn pip(&self, name: &str) -> Option<PublicIpAddress> {
        let id = self
            .arm
            .resource_id(RG, "Microsoft.Network/publicIPAddresses", name);
        match self.arm.get(&id).await {
            Ok(p) => Some(p),
            Err(e) if e.is_not_found() => None,
            Err(e) => panic!("{e}"),
        }
    }

    async fn nsg(&self) -> NetworkSecurityGroup {
        self.arm
            .get(
                &self
                    .arm
                    .resource_id(RG, "Microsoft.Network/networkSecurityGroups", NSG),
            )
            .await
            .unwrap()
    }
}

fn service(uid: &str, name: &str, port: i32, node_port: i32, annotations: Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop", "uid": uid, "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"protocol": "TCP", "port": port, "nodePort": node_port}]}
    }))
    .unwrap()
}

fn ingress_ip(status: &k8s_openapi::api::core::v1::LoadBalancerStatus) -> String {
    status.ingress.as_ref().unwrap()[0].ip.clone().unwrap()
}

/// A TCP server on `ip:port` answering every connection with `greeting`.
async fn backend(ip: &str, port: u16, greeting: &'static str) -> tokio::task::JoinHandle<()> {
    let l = TcpListener::bind((ip, port)).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(greeting.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    })
}

/// What a connection to `ip:port` reads, if anything.
async fn greeting(ip: &str, port: u16) -> Option<String> {
    let read = async {
        let mut s = TcpStream::connect((ip, port)).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        (!out.is_empty()).then_some(out)
    };
    tokio::time::timeout(Duration::from_secs(2), read)
        .await
        .ok()
        .flatten()
}

/// Waits (up to 40 s: probes every 5 s) until `n` connections in a row read what `ok` wants.
async fn wait_for(what: &str, ip: &str, port: u16, n: usize, ok: impl Fn(Option<&str>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut streak = 0;
    let mut last = None;
    while streak < n {
        assert!(
            Instant::now() < deadline,
            "{what} through {ip}:{port}: last read {last:?}"
        );
        last = greeting(ip, port).await;
        if ok(last.as_deref()) {
            streak += 1;
        } else {
            streak = 0;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The Service port: 80 where this process may listen there, else 8080.
fn port_80_or_8080() -> i32 {
    match std::net::TcpListener::bind("127.0.0.77:80") {
        Ok(_) => 80,
        Err(_) => 8080,
    }
}

fn id_ends(r: Option<&hypercloud_providers_azure::models::Reference>, tail: &str) -> bool {
    r.and_then(|r| r.id.as_deref())
        .is_some_and(|id| id.to_lowercase().ends_with(&tail.to_lowercase()))
}

#[tokio::test]
async fn a_public_service_carries_traffic_follows_its_nodes_and_goes() {
    let site = site("127.5", "127.15.100.0/24").await;
    let (n1, n2) = (site.node("node-1", 10).await, site.node("node-2", 11).await);
    let _b1 = backend(&site.ip(10), 30080, "node-1\n").await;
    let _b2 = backend(&site.ip(11), 30080, "node-2\n").await;
    let port = port_80_or_8080();
    let svc = service(
        "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
        "web",
        port,
        30080,
        json!({FLOATING_OFF: "true"}),
    );
    let prefix = default_load_balancer_name(&svc);
    assert_eq!(prefix, "a1b4e28ba2fa111d2883f0016d3cca42");
    let azure = &site.azure;

    let before = azure.api_calls();
    let status = azure
        .ensure_load_balancer(CLUSTER, &svc, &[n1.clone(), n2.clone()])
        .await
        .unwrap();
    let created = azure.api_calls() - before;
    let ip = ingress_ip(&status);

    // What ARM holds: the cluster's load balancer with the Service's parts.
    let lb = site.lb(CLUSTER).await.expect("load balancer kubernetes");
    assert_eq!(lb.sku.as_ref().unwrap().name.as_deref(), Some("Standard"));
    assert_eq!(lb.tags.get("team").map(String::as_str), Some("web"));
    let p = &lb.properties;
    assert_eq!(p.frontend_ip_configurations.len(), 1);
    let frontend = &p.frontend_ip_configurations[0];
    assert_eq!(frontend.name.as_deref(), Some(prefix.as_str()));
    let pip_name = format!("{CLUSTER}-{prefix}");
    assert!(id_ends(
        frontend.properties.public_ip_address.as_ref(),
        &pip_name
    ));
    let rule_name = format!("{prefix}-TCP-{port}");
    assert_eq!(p.load_balancing_rules.len(), 1);
    let rule = &p.load_balancing_rules[0];
    assert_eq!(rule.name.as_deref(), Some(rule_name.as_str()));
    let r = &rule.properties;
    assert_eq!(
        (
            r.protocol.as_deref(),
            r.frontend_port,
            r.backend_port,
            r.enable_floating_ip,
            r.enable_tcp_reset
        ),
        (
            Some("Tcp"),
            Some(port),
            Some(30080),
            Some(false),
            Some(true)
        )
    );
    assert!(id_ends(r.probe.as_ref(), &format!("/probes/{rule_name}")));
    assert!(id_ends(
        r.backend_address_pool.as_ref(),
        "/backendAddressPools/kubernetes"
    ));
    let probe = &p.probes[0];
    assert_eq!(probe.name.as_deref(), Some(rule_name.as_str()));
    assert_eq!(
        (probe.properties.protocol.as_deref(), probe.properties.port),
        (Some("Tcp"), Some(30080))
    );
    assert_eq!(p.backend_address_pools[0].name.as_deref(), Some(CLUSTER));
    assert_eq!(
        p.backend_address_pools[0]
            .properties
            .backend_ip_configurations
            .len(),
        2
    );
    for node in ["node-1", "node-2"] {
        let pools = site.pools_of(node).await;
        assert!(
            pools.len() == 1
                && pools[0]
                    .to_lowercase()
                    .ends_with("/loadbalancers/kubernetes/backendaddresspools/kubernetes"),
            "{node}: {pools:?}"
        );
    }
    let pip = site.pip(&pip_name).await.expect("the Service's public IP");
    assert_eq!(pip.properties.ip_address.as_deref(), Some(ip.as_str()));
    assert_eq!(pip.sku.as_ref().unwrap().name.as_deref(), Some("Standard"));
    assert_eq!(
        pip.properties.public_ip_allocation_method.as_deref(),
        Some("Static")
    );
    assert_eq!(
        pip.tags.get("service").map(String::as_str),
        Some("shop/web")
    );
    assert_eq!(
        pip.tags.get("kubernetes-cluster-name").map(String::as_str),
        Some(CLUSTER)
    );
    let nsg = site.nsg().await;
    assert_eq!(nsg.properties.security_rules.len(), 1);
    let sr = &nsg.properties.security_rules[0];
    assert_eq!(
        sr.name.as_deref(),
        Some(&*format!("{prefix}-TCP-{port}-Internet"))
    );
    let s = &sr.properties;
    assert_eq!(
        (
            s.priority,
            s.destination_port_range.as_deref(),
            s.source_address_prefix.as_deref(),
            s.access.as_deref()
        ),
        (Some(500), Some("30080"), Some("Internet"), Some("Allow"))
    );
    assert_eq!(s.destination_address_prefixes, [site.ip(10), site.ip(11)]);

    // Traffic: the public IP's port reaches both nodes' NodePort.
    let port = u16::try_from(port).unwrap();
    wait_for("a node answering", &ip, port, 3, |g| {
        g.is_some_and(|g| g.starts_with("node-"))
    })
    .await;
    assert_eq!(
        greeting(&site.ip(10), 30080).await.as_deref(),
        Some("node-1\n")
    );

    // One node only: node-2's NIC leaves the pool, the rule opens node-1 only, and traffic
    // reaches node-1 only.
    azure
        .update_load_balancer(CLUSTER, &svc, std::slice::from_ref(&n1))
        .await
        .unwrap();
    assert!(site.pools_of("node-2").await.is_empty());
    assert_eq!(site.pools_of("node-1").await.len(), 1);
    let nsg = site.nsg().await;
    let s = &nsg.properties.security_rules[0].properties;
    assert_eq!(
        (s.priority, s.destination_address_prefix.clone()),
        (Some(500), Some(site.ip(10)))
    );
    wait_for("node-1 alone answering", &ip, port, 6, |g| {
        g == Some("node-1\n")
    })
    .await;

    // Nothing changed: reads only, the etags stay.
    let (lb_etag, nsg_etag) = (site.lb(CLUSTER).await.unwrap().etag, site.nsg().await.etag);
    let before = azure.api_calls();
    let again = azure
        .ensure_load_balancer(CLUSTER, &svc, std::slice::from_ref(&n1))
        .await
        .unwrap();
    let unchanged = azure.api_calls() - before;
    assert_eq!(again, status);
    assert_eq!(site.lb(CLUSTER).await.unwrap().etag, lb_etag);
    assert_eq!(site.nsg().await.etag, nsg_etag);
    let got = azure.get_load_balancer(CLUSTER, &svc).await.unwrap();
    assert_eq!(got, Some(status.clone()));

    // Deleted: the security rule, the NICs' pool references, the load balancer (its last
    // frontend gone) and the public IP; traffic stops.
    let before = azure.api_calls();
    azure
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    let deleted = azure.api_calls() - before;
    assert!(site.nsg().await.properties.security_rules.is_empty());
    assert!(site.pools_of("node-1").await.is_empty());
    assert!(
        site.lb(CLUSTER).await.is_none(),
        "the empty load balancer is deleted"
    );
    assert!(
        site.pip(&pip_name).await.is_none(),
        "the public IP is deleted"
    );
    wait_for("nothing answering", &ip, port, 1, |g| g.is_none()).await;
    assert_eq!(azure.get_load_balancer(CLUSTER, &svc).await.unwrap(), None);
    azure
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    eprintln!(
        "azure load balancer ARM requests (2 nodes, 1 port): create {created}, unchanged ensure {unchanged}, delete {deleted}"
    );
    site.cloud.shutdown().await;
}
