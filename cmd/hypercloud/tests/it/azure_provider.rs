//! `--cloud-provider=azure` end to end: the real binary, the real apiserver (pkg/testenv) and
//! the local cloud's Azure dialect (Resource Manager and Entra over TLS with its own CA,
//! `--tls-self-signed`; the instance metadata service), driven through ARM as Microsoft's
//! clients drive it (hack/lib/cloud-azure.sh is the demo's recipe). The provider finds the cloud
//! as an AzureStackCloud cluster does: `azure.json` (`cloud: AzureStackCloud`), the endpoints in
//! the file `AZURE_ENVIRONMENT_FILEPATH` names, the CA in `REQUESTS_CA_BUNDLE`.
//!
//! - In-tree layout: kubelet-helper with `useInstanceMetadata` asks the metadata service from
//!   its VM's address and registers the Node with provider ID, address and zone.
//! - External layout, node half: `kubelet-helper cloud-node-manager` initialises its own
//!   tainted Node from the metadata service without a working credential.
//! - External layout: the cloud-controller-manager initialises a tainted Node from its VM
//!   (provider ID with the group lower-cased, the NIC's address, size, fault domain, location);
//!   the route controller puts a route named as the Node in `k8s-routes`; a LoadBalancer Service
//!   becomes a frontend of load balancer `kubernetes`, the NIC in its pool, and TCP flows
//!   through it to the node; deleting the Service removes it all and the traffic stops; the
//!   PV-label controller labels an `azureDisk` PV; a powered-off VM taints its Node, a deleted
//!   one deletes it and its route.
//! - Faults: with 30% of the answers throttled and `cloudProviderBackoff`, a Node is still
//!   initialised; with every long-running change failing, the Service's Event names the failed
//!   PUT and nothing of the load balancer is made.
#![cfg(feature = "azure")]
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hypercloud_testenv::localcloud::local_cloud;
use hypercloud_testenv::net::{request, Backend};
use hypercloud_testenv::nodes::{
    self, create_tainted, has_taint, internal_ip, provider_id, set_ready, TAINT_UNINITIALIZED,
};
use hypercloud_testenv::process::{free_port, personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use reqwest::Method;
use serde_json::{json, Value};

use crate::BIN;

const TENANT: &str = "6c6f6361-6c63-6c6f-7564-74656e616e74";
const LOCATION: &str = "regionone";
/// Mixed case: the provider ID has it lower-cased.
const GROUP: &str = "Hypercloud-IT";
const SIZE: &str = "Standard_D2s_v3";
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
const POD_CIDR: &str = "10.253.7.0/24";
const MINUTE: Duration = Duration::from_secs(60);

fn label<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// A Keystone hex ID in GUID form.
fn guid(h: &str) -> String {
    let parts = [(0, 8), (8, 12), (12, 16), (16, 20), (20, 32)].map(|(a, b)| &h[a..b]);
    parts.join("-")
}

/// A `local-cloud serve --tls-self-signed` on a fixed loopback port, so that a restart (with
/// other fault flags) keeps its address, state and CA, and an ARM client signed in to it.
#[derive(Default)]
struct Cloud {
    proc: Option<Proc>,
    dir: PathBuf,
    port: u16,
    starts: u32,
    url: String,
    metadata_url: String,
    ca: PathBuf,
    http: reqwest::Client,
    subscription: String,
    client_id: String,
    token: String,
}

impl Cloud {
    async fn start(dir: &Path) -> Cloud {
        let mut cloud = Cloud {
            dir: dir.to_owned(),
            port: free_port(),
            ca: dir.join("cloud/tls/ca.pem"),
            ..Cloud::default()
        };
        cloud.restart(&[]).await;
        let auth = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}},
            "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}});
        let resp = (cloud.http)
            .post(format!("{}/identity/v3/auth/tokens", cloud.url))
            .json(&auth)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201);
        let t: Value = resp.json().await.unwrap();
        cloud.client_id = guid(t["token"]["user"]["id"].as_str().unwrap());
        cloud.subscription = guid(t["token"]["project"]["id"].as_str().unwrap());
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", cloud.client_id.as_str()),
            ("client_secret", "hypercloud"),
            ("scope", "https://management.azure.com/.default"),
        ];
        let resp = (cloud.http)
            .post(format!("{}/{TENANT}/oauth2/v2.0/token", cloud.url))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let t: Value = resp.json().await.unwrap();
        cloud.token = t["access_token"].as_str().unwrap().to_owned();
        cloud
    }

    /// Stops the server (SIGTERM) if it runs and starts it again with `extra` serve flags.
    async fn restart(&mut self, extra: &[&str]) {
        if let Some(mut p) = self.proc.take() {
            p.sigterm();
            assert_eq!(p.wait_exit(Duration::from_secs(30)), Some(0), "serve exit");
        }
        self.starts += 1;
        let state = self.dir.join("cloud");
        let mut cmd = local_cloud(BIN);
        cmd.arg("--state-dir").arg(&state).args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{}", self.port),
            "--metadata-listen",
            "127.0.0.1:0",
            "--tls-self-signed",
        ]);
        cmd.args(extra);
        let log = self.dir.join(format!("cloud-{}.log", self.starts));
        let proc = Proc::spawn("local-cloud serve", cmd, log);
        let pid = proc.pid();
        self.proc = Some(proc);
        let info: Value = eventually("the local cloud's server.json", MINUTE, || async {
            let text = std::fs::read_to_string(state.join("server.json")).ok()?;
            serde_json::from_str::<Value>(&text)
                .ok()
                .filter(|i| i["pid"] == pid)
        })
        .await;
        self.url = info["api_url"].as_str().unwrap().to_owned();
        self.metadata_url = info["metadata_url"].as_str().unwrap().to_owned();
        assert_eq!(self.url, format!("https://127.0.0.1:{}", self.port));
        let ca = std::fs::read(&self.ca).unwrap();
        self.http = reqwest::Client::builder()
            .no_proxy()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let url = format!("{}/metadata/endpoints?api-version=2022-09-01", self.url);
        eventually("the Azure dialect over TLS", MINUTE, || async {
            let resp = self.http.get(&url).send().await.ok()?;
            resp.status().is_success().then_some(())
        })
        .await;
    }

    /// The URL of an ARM path: below the subscription (`resourceGroups/...`), absolute, or a
    /// URL ARM handed out; `api-version` added as azure-arm.py adds it.
    fn arm_url(&self, path: &str) -> String {
        if path.starts_with("https://") {
            return path.to_owned();
        }
        let path = match path.strip_prefix('/') {
            Some(p) => format!("/{p}"),
            None => format!("/subscriptions/{}/{path}", self.subscription),
        };
        let version = if path.contains("/providers/Microsoft.Compute/") {
            "2024-07-01"
        } else if path.contains("/providers/Microsoft.Network/") {
            "2024-05-01"
        } else {
            "2024-03-01"
        };
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{}{path}{sep}api-version={version}", self.url)
    }

    /// One ARM call, again while throttled or unreachable: status, body and the operation to
    /// poll (`Azure-AsyncOperation`).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value, Option<String>) {
        let url = self.arm_url(path);
        for _ in 0..60 {
            let mut req = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(&self.token);
            if let Some(b) = body {
                req = req.json(b);
            }
            match req.send().await {
                Ok(resp) if resp.status().as_u16() != 429 => {
                    let status = resp.status().as_u16();
                    let op = resp
                        .headers()
                        .get("azure-asyncoperation")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let text = resp.text().await.unwrap_or_default();
                    return (
                        status,
                        serde_json::from_str(&text).unwrap_or(Value::Null),
                        op,
                    );
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        panic!("{method} {url}: throttled or unreachable for 30 s");
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let (status, body, _) = self.call(Method::GET, path, None).await;
        (status, body)
    }

    /// A change: asserts it is accepted and its operation succeeds.
    async fn change(&self, method: Method, path: &str, body: Option<&Value>) -> Value {
        let (status, answer, op) = self.call(method.clone(), path, body).await;
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {answer}"
        );
        if let Some(op) = op {
            let o = eventually("the ARM operation to end", MINUTE, || async {
                let (_, o, _) = self.call(Method::GET, &op, None).await;
                (o["status"] != "InProgress").then_some(o)
            })
            .await;
            assert_eq!(o["status"], "Succeeded", "{method} {path}: {o}");
        }
        answer
    }

    /// PUT, then the resource as it is now.
    async fn put(&self, path: &str, body: Value) -> Value {
        self.change(Method::PUT, path, Some(&body)).await;
        let (status, resource) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {resource}");
        resource
    }

    fn id(&self, kind: &str, name: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{GROUP}/providers/{kind}/{name}",
            self.subscription
        )
    }

    /// `azure.json` in the test's dir as `name`: upstream's keys for this cloud, and `extra`.
    fn azure_json(&self, name: &str, extra: Value) -> PathBuf {
        let mut conf = json!({
            "cloud": "AzureStackCloud", "tenantId": TENANT,
            "subscriptionId": self.subscription, "aadClientId": self.client_id,
            "aadClientSecret": "hypercloud", "resourceGroup": GROUP, "location": LOCATION,
            "vnetName": "nodes-vnet", "subnetName": "nodes", "securityGroupName": "nodes-nsg",
            "routeTableName": "k8s-routes", "primaryAvailabilitySetName": "nodes",
            "loadBalancerSku": "standard", "vmType": "standard",
        });
        for (k, v) in extra.as_object().unwrap() {
            conf[k] = v.clone();
        }
        let path = self.dir.join(name);
        std::fs::write(&path, conf.to_string()).unwrap();
        path
    }

    /// A personality, with the environment an AzureStackCloud cluster gives it: the endpoints'
    /// file and the CA.
    fn personality(&self, name: &str) -> Command {
        let env_file = self.dir.join("azurestackcloud.json");
        let endpoints = json!({"name": "AzureStackCloud",
            "resourceManagerEndpoint": format!("{}/", self.url),
            "activeDirectoryEndpoint": format!("{}/", self.url),
            "serviceManagementEndpoint": "https://management.core.windows.net/"});
        std::fs::write(&env_file, endpoints.to_string()).unwrap();
        let mut cmd = personality(BIN, name);
        cmd.env("AZURE_ENVIRONMENT_FILEPATH", &env_file)
            .env("REQUESTS_CA_BUNDLE", &self.ca);
        cmd
    }
}

/// A VM of the test: its name (the Node's) and its NIC's address.
struct Vm {
    name: String,
    ip: String,
}

/// The resource group: a security group, a virtual network on loopback addresses (the local
/// cloud forwards load-balancer traffic only to addresses this machine has) whose subnet has
/// the security group, and an availability set.
async fn site(cloud: &Cloud) {
    let g = format!("resourceGroups/{GROUP}");
    cloud.put(&g, json!({"location": LOCATION})).await;
    let nsg = format!("{g}/providers/Microsoft.Network/networkSecurityGroups/nodes-nsg");
    cloud.put(&nsg, json!({"location": LOCATION})).await;
    let nsg_id = cloud.id("Microsoft.Network/networkSecurityGroups", "nodes-nsg");
    cloud
        .put(
            &format!("{g}/providers/Microsoft.Network/virtualNetworks/nodes-vnet"),
            json!({"location": LOCATION, "properties": {
                "addressSpace": {"addressPrefixes": ["127.8.0.0/16"]},
                "subnets": [{"name": "nodes", "properties": {"addressPrefix": "127.8.1.0/24",
                    "networkSecurityGroup": {"id": nsg_id}}}]}}),
        )
        .await;
    cloud
        .put(
            &format!("{g}/providers/Microsoft.Compute/availabilitySets/nodes"),
            json!({"location": LOCATION, "sku": {"name": "Aligned"},
                "properties": {"platformFaultDomainCount": 2}}),
        )
        .await;
}

/// A NIC on the subnet and a VM `name` of size [`SIZE`] in the availability set.
async fn vm(cloud: &Cloud, name: &str) -> Vm {
    let g = format!("resourceGroups/{GROUP}");
    let subnet = cloud.id(
        "Microsoft.Network/virtualNetworks",
        "nodes-vnet/subnets/nodes",
    );
    let nic = cloud
        .put(
            &format!("{g}/providers/Microsoft.Network/networkInterfaces/{name}-nic"),
            json!({"location": LOCATION, "properties": {"ipConfigurations": [{"name": "ipconfig1",
                "properties": {"primary": true, "subnet": {"id": subnet}}}]}}),
        )
        .await;
    let ip = nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
        .as_str()
        .unwrap_or_else(|| panic!("{nic}"))
        .to_owned();
    cloud
        .put(
            &format!("{g}/providers/Microsoft.Compute/virtualMachines/{name}"),
            json!({"location": LOCATION, "properties": {
                "hardwareProfile": {"vmSize": SIZE},
                "osProfile": {"computerName": name, "adminUsername": "azureuser"},
                "storageProfile": {"imageReference": {"publisher": "Canonical",
                    "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"}},
                "networkProfile": {"networkInterfaces": [{"id": nic["id"], "properties": {"primary": true}}]},
                "availabilitySet": {"id": cloud.id("Microsoft.Compute/availabilitySets", "nodes")}}}),
        )
        .await;
    Vm {
        name: name.to_owned(),
        ip,
    }
}

fn expected_provider_id(cloud: &Cloud, name: &str) -> String {
    format!(
        "azure:///subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{name}",
        cloud.subscription,
        GROUP.to_lowercase()
    )
}

/// One test, in steps: the CCM's node lifecycle controller deletes every NotReady Node whose
/// VM its cloud does not have, so no other Node of the module may exist while a CCM runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_provider_in_tree_and_external() {
    let _group = hypercloud_testenv::group("azure_provider").await;
    let env = TestEnv::new("azure").await.expect("testenv");
    let dir = tempfile::tempdir().unwrap();
    let mut cloud = Cloud::start(dir.path()).await;
    site(&cloud).await;
    // In this order in the availability set: fault domains 0, 1 and 0.
    let ccm_vm = vm(&cloud, &env.unique_name("az-node")).await;
    let kubelet_vm = vm(&cloud, &env.unique_name("az-kubelet")).await;
    let fault_vm = vm(&cloud, &env.unique_name("az-faults")).await;
    // Fault domains 1 and 0.
    let cnm_vm = vm(&cloud, &env.unique_name("az-cnm")).await;
    let cnm_beta_vm = vm(&cloud, &env.unique_name("az-cnm-beta")).await;
    let cnm_arm_vm = vm(&cloud, &env.unique_name("az-cnm-arm")).await;
    kubelet_helper_in_tree_knows_itself_from_the_metadata_service(&env, &cloud, &kubelet_vm).await;
    cloud_node_manager_initialises_its_own_node(&env, &cloud, [&cnm_vm, &cnm_beta_vm, &cnm_arm_vm])
        .await;
    ccm_initialises_routes_balances_and_deletes(&env, &cloud, &ccm_vm).await;
    faults(&env, &mut cloud, &fault_vm).await;
}

/// The external layout's node half: `kubelet-helper cloud-node-manager` initialises its own
/// tainted Node from the metadata service alone (its azure.json's client secret is wrong, so any
/// Entra or Resource Manager call would fail): GA labels only by default, the metadata
/// service's address order (Hostname first); with --enable-deprecated-beta-topology-labels the
/// beta labels too, with --wait-routes NetworkUnavailable until a route exists; with
/// --use-instance-metadata=false (and the right secret) from Resource Manager, whose address
/// order differs.
async fn cloud_node_manager_initialises_its_own_node(
    env: &TestEnv,
    cloud: &Cloud,
    [plain, beta, arm]: [&Vm; 3],
) {
    let nodes: Api<Node> = Api::all(env.client());
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let mut procs = Vec::new();
    for (vm, flags) in [
        (plain, &[][..]),
        (
            beta,
            &[
                "--wait-routes",
                "--enable-deprecated-beta-topology-labels=true",
            ][..],
        ),
    ] {
        create_tainted(&nodes, &vm.name).await;
        let conf = cloud.azure_json(
            &format!("azure-{}.json", vm.name),
            json!({"aadClientSecret": "not-the-secret",
                "hypercloudInstanceMetadataEndpoint": cloud.metadata_url,
                "hypercloudInstanceMetadataSourceAddress": vm.ip}),
        );
        procs.push(node_manager(cloud, &conf, &kubeconfig, vm, flags));
    }
    let conf = cloud.azure_json("azure-cnm-arm.json", json!({"useInstanceMetadata": true}));
    create_tainted(&nodes, &arm.name).await;
    procs.push(node_manager(
        cloud,
        &conf,
        &kubeconfig,
        arm,
        &["--use-instance-metadata=false"],
    ));
    let addresses = |n: &Node| -> Vec<(String, String)> {
        n.status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect()
    };
    let initialised = |n: &Node| !has_taint(n, TAINT_UNINITIALIZED);
    let n = nodes::wait_for(
        &nodes,
        &plain.name,
        "the node manager to initialise its Node",
        MINUTE,
        initialised,
    )
    .await;
    assert_eq!(
        provider_id(&n),
        Some(expected_provider_id(cloud, &plain.name).as_str())
    );
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("1"));
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some(LOCATION));
    assert_eq!(label(&n, "node.kubernetes.io/instance-type"), Some(SIZE));
    assert_eq!(label(&n, "failure-domain.beta.kubernetes.io/zone"), None);
    assert_eq!(label(&n, "beta.kubernetes.io/instance-type"), None);
    assert_eq!(
        addresses(&n),
        [
            ("Hostname".to_owned(), plain.name.clone()),
            ("InternalIP".to_owned(), plain.ip.clone())
        ]
    );
    let n = nodes::wait_for(
        &nodes,
        &beta.name,
        "the node manager to initialise its Node",
        MINUTE,
        initialised,
    )
    .await;
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("0"));
    assert_eq!(
        label(&n, "failure-domain.beta.kubernetes.io/zone"),
        Some("0")
    );
    assert_eq!(
        label(&n, "failure-domain.beta.kubernetes.io/region"),
        Some(LOCATION)
    );
    assert_eq!(label(&n, "beta.kubernetes.io/instance-type"), Some(SIZE));
    let network = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "NetworkUnavailable"))
        .map(|c| (c.status.clone(), c.reason.clone()));
    assert_eq!(
        network,
        Some(("True".to_owned(), Some("NodeInitialization".to_owned())))
    );
    let n = nodes::wait_for(
        &nodes,
        &arm.name,
        "the node manager to initialise its Node from Resource Manager",
        MINUTE,
        initialised,
    )
    .await;
    assert_eq!(
        provider_id(&n),
        Some(expected_provider_id(cloud, &arm.name).as_str())
    );
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("1"));
    assert_eq!(
        addresses(&n),
        [
            ("InternalIP".to_owned(), arm.ip.clone()),
            ("Hostname".to_owned(), arm.name.clone())
        ]
    );
    for mut p in procs {
        p.sigterm();
        assert_eq!(
            p.wait_exit(Duration::from_secs(30)),
            Some(0),
            "node manager exit"
        );
    }
    for vm in [plain, beta, arm] {
        let _ = nodes.delete(&vm.name, &DeleteParams::default()).await;
    }
}

async fn kubelet_helper_in_tree_knows_itself_from_the_metadata_service(
    env: &TestEnv,
    cloud: &Cloud,
    vm: &Vm,
) {
    // Metadata requests leave from the VM's address: that is who is asking.
    let conf = cloud.azure_json(
        "azure-kubelet.json",
        json!({"useInstanceMetadata": true,
            "hypercloudInstanceMetadataEndpoint": cloud.metadata_url,
            "hypercloudInstanceMetadataSourceAddress": vm.ip}),
    );
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let out = cloud
        .personality("kubelet-helper")
        .args([
            "--cloud-provider=azure",
            &format!("--cloud-config={}", conf.display()),
            &format!("--kubeconfig={kubeconfig}"),
            &format!("--hostname-override={}", vm.name),
            "--once",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let nodes: Api<Node> = Api::all(env.client());
    let n = nodes.get(&vm.name).await.expect("registered");
    assert_eq!(
        provider_id(&n),
        Some(expected_provider_id(cloud, &vm.name).as_str())
    );
    assert_eq!(internal_ip(&n), Some(vm.ip.clone()));
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("1"));
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some(LOCATION));
    assert_eq!(label(&n, "node.kubernetes.io/instance-type"), Some(SIZE));
    assert!(!has_taint(&n, TAINT_UNINITIALIZED));
    let _ = nodes.delete(&vm.name, &DeleteParams::default()).await;
}

/// `kubelet-helper cloud-node-manager` for `vm` with `conf` and more `flags`.
fn node_manager(cloud: &Cloud, conf: &Path, kubeconfig: &str, vm: &Vm, flags: &[&str]) -> Proc {
    let mut cmd = cloud.personality("kubelet-helper");
    cmd.args([
        "cloud-node-manager",
        &format!("--cloud-config={}", conf.display()),
        &format!("--kubeconfig={kubeconfig}"),
        &format!("--node-name={}", vm.name),
        "--v=2",
    ])
    .args(flags);
    let log = cloud.dir.join(format!("cnm-{}.log", vm.name));
    Proc::spawn_with("cloud-node-manager", cmd, log, Stdout::Null)
}

/// The cloud-controller-manager with `conf` and more `args` (`--controllers`).
fn ccm(env: &TestEnv, cloud: &Cloud, conf: &Path, args: &[&str], log: &str) -> Proc {
    let mut cmd = cloud.personality("cloud-controller-manager");
    cmd.arg("--cloud-provider=azure")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .args(args)
        .args([
            "--leader-elect=false",
            "--secure-port=0",
            "--node-monitor-period=1s",
            "--concurrent-service-syncs=1",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.253.0.0/16",
            "--configure-cloud-routes=true",
            "--route-reconciliation-period=1s",
            "--v=2",
        ]);
    Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        cloud.dir.join(log),
        Stdout::Null,
    )
}

async fn ccm_initialises_routes_balances_and_deletes(env: &TestEnv, cloud: &Cloud, vm: &Vm) {
    let node = vm.name.as_str();
    let conf = cloud.azure_json("azure.json", json!({}));
    let nodes: Api<Node> = Api::all(env.client());
    create_tainted(&nodes, node).await;
    // The pod CIDR node IPAM would give (not run here: it would hand CIDRs to every Node of
    // the shared apiserver).
    let cidr = json!({"spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(cidr))
        .await
        .unwrap();
    set_ready(&nodes, node, true).await;
    let controllers =
        "--controllers=cloud-node,cloud-node-lifecycle,route,service,persistentvolume-label-controller";
    let ccm = ccm(env, cloud, &conf, &[controllers], "ccm.log");

    let n = nodes::wait_for(
        &nodes,
        node,
        "the Node to be initialised from its VM",
        MINUTE,
        |n| {
            !has_taint(n, TAINT_UNINITIALIZED)
                && provider_id(n).is_some_and(|id| !id.is_empty())
                && internal_ip(n).is_some()
        },
    )
    .await;
    assert_eq!(
        provider_id(&n),
        Some(expected_provider_id(cloud, node).as_str())
    );
    assert_eq!(internal_ip(&n), Some(vm.ip.clone()));
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("0"));
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some(LOCATION));
    assert_eq!(label(&n, "node.kubernetes.io/instance-type"), Some(SIZE));

    // The route controller: a route named as the Node in k8s-routes, to the NIC's address.
    let route_path = format!(
        "resourceGroups/{GROUP}/providers/Microsoft.Network/routeTables/k8s-routes/routes/{node}"
    );
    let route = eventually("the Node's route", MINUTE, || async {
        let (status, r) = cloud.get(&route_path).await;
        (status == 200).then_some(r)
    })
    .await;
    let p = &route["properties"];
    assert_eq!(p["addressPrefix"], POD_CIDR, "{route}");
    assert_eq!(p["nextHopType"], "VirtualAppliance", "{route}");
    assert_eq!(p["nextHopIpAddress"], vm.ip.as_str(), "{route}");
    nodes::wait_for(&nodes, node, "NetworkUnavailable=False", MINUTE, |n| {
        let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False")
        })
    })
    .await;

    load_balancer(env, cloud, vm).await;
    pv_labels(env, cloud).await;

    // Powered off through ARM, and its kubelet stops posting Ready: the shutdown taint.
    let vm_path =
        format!("resourceGroups/{GROUP}/providers/Microsoft.Compute/virtualMachines/{node}");
    cloud
        .change(Method::POST, &format!("{vm_path}/powerOff"), None)
        .await;
    set_ready(&nodes, node, false).await;
    nodes::wait_for(&nodes, node, "the shutdown taint", MINUTE, |n| {
        has_taint(n, SHUTDOWN)
    })
    .await;

    // Deleted: the Node goes, and its route with it.
    cloud.change(Method::DELETE, &vm_path, None).await;
    eventually(
        "the Node of the deleted VM to be deleted",
        MINUTE,
        || async { nodes.get_opt(node).await.unwrap().is_none().then_some(()) },
    )
    .await;
    eventually("the deleted Node's route to go", MINUTE, || async {
        (cloud.get(&route_path).await.0 == 404).then_some(())
    })
    .await;
    drop(ccm);
}

fn services(env: &TestEnv) -> Api<Service> {
    Api::namespaced(env.client(), env.namespace())
}

/// Creates LoadBalancer Service `name` of TCP port 8080; it, and its frontend's name `a<uid>`.
async fn lb_service(services: &Api<Service>, name: &str) -> (Service, String) {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "selector": {"app": "none"},
            "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}]}
    }))
    .unwrap();
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap().replace('-', "");
    (created, format!("a{uid}").chars().take(32).collect())
}

/// The Service's ingress IP, once it has one.
async fn ingress_ip(services: &Api<Service>, name: &str) -> Option<String> {
    let s = services.get(name).await.ok()?;
    s.status?.load_balancer?.ingress?.first()?.ip.clone()
}

/// A LoadBalancer Service on port 8080: a frontend `a<uid>` of load balancer `kubernetes`, the
/// NIC in pool `kubernetes`, and real traffic through the frontend to the node (floating IP:
/// the backend gets the Service port, as kube-proxy would catch it; the probe asks the
/// NodePort); deleting the Service removes them and the traffic stops.
async fn load_balancer(env: &TestEnv, cloud: &Cloud, vm: &Vm) {
    let (services, name) = (services(env), env.unique_name("az-lb"));
    let (created, frontend) = lb_service(&services, &name).await;
    let node_port = created.spec.unwrap().ports.unwrap()[0].node_port.unwrap();
    let greeting = format!("hello from {}\n", vm.name);
    let node_ip: std::net::IpAddr = vm.ip.parse().unwrap();
    let _service_port = Backend::start((node_ip, 8080).into(), greeting.clone()).await;
    let _node_port = Backend::start((node_ip, node_port as u16).into(), greeting.clone()).await;
    let ip = eventually("the Service's ingress IP", MINUTE, || {
        ingress_ip(&services, &name)
    })
    .await;

    let lb_path =
        format!("resourceGroups/{GROUP}/providers/Microsoft.Network/loadBalancers/kubernetes");
    let (status, lb) = cloud.get(&lb_path).await;
    assert_eq!(status, 200, "{lb}");
    assert_eq!(lb["sku"]["name"], "Standard", "{lb}");
    let p = &lb["properties"];
    let frontends = p["frontendIPConfigurations"].as_array().unwrap();
    assert_eq!(frontends.len(), 1, "{lb}");
    assert_eq!(frontends[0]["name"], frontend.as_str(), "{lb}");
    let pool = &p["backendAddressPools"][0];
    assert_eq!(pool["name"], "kubernetes", "{lb}");
    let members = pool["properties"]["backendIPConfigurations"].to_string();
    assert!(
        members.contains(&format!(
            "/networkInterfaces/{}-nic/ipConfigurations/ipconfig1",
            vm.name
        )),
        "{lb}"
    );
    let rule = &p["loadBalancingRules"][0]["properties"];
    let ports = [
        &rule["frontendPort"],
        &rule["backendPort"],
        &rule["enableFloatingIP"],
    ];
    assert_eq!(ports, [&json!(8080), &json!(8080), &json!(true)], "{lb}");
    let addr: std::net::SocketAddr = format!("{ip}:8080").parse().unwrap();
    let answer = eventually("traffic through the frontend", MINUTE, || request(addr)).await;
    assert_eq!(answer, greeting);

    services
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    // The only frontend gone, the load balancer goes too.
    eventually(
        "the load balancer to go with its last frontend",
        MINUTE,
        || async { (cloud.get(&lb_path).await.0 == 404).then_some(()) },
    )
    .await;
    eventually("the Service to go", MINUTE, || async {
        services.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(request(addr).await, None, "traffic after the Service went");
}

/// The PV-label controller gives an `azureDisk` PV its zonal disk's zone and region.
async fn pv_labels(env: &TestEnv, cloud: &Cloud) {
    let disk = env.unique_name("az-disk");
    let d = cloud
        .put(
            &format!("resourceGroups/{GROUP}/providers/Microsoft.Compute/disks/{disk}"),
            json!({"location": LOCATION, "zones": ["1"], "sku": {"name": "StandardSSD_LRS"},
                "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 1}}),
        )
        .await;
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": disk},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "azureDisk": {"diskName": disk, "diskURI": d["id"], "kind": "Managed",
                "cachingMode": "ReadOnly", "fsType": "ext4"}}
    }))
    .unwrap();
    pvs.create(&PostParams::default(), &pv).await.unwrap();
    let labelled = eventually("the PV's zone labels", MINUTE, || async {
        pvs.get(&disk).await.ok().filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("topology.kubernetes.io/zone"))
        })
    })
    .await;
    let labels = labelled.metadata.labels.unwrap();
    assert_eq!(labels["topology.kubernetes.io/zone"], "regionone-1");
    assert_eq!(labels["topology.kubernetes.io/region"], LOCATION);
    let _ = pvs.delete(&disk, &DeleteParams::default()).await;
}

/// Faults end to end: throttled answers retried with `cloudProviderBackoff` (the token request
/// too), then failed long-running operations reported on the Service.
async fn faults(env: &TestEnv, cloud: &mut Cloud, vm: &Vm) {
    cloud
        .restart(&["--inject-throttle-rate", "azure=0.3"])
        .await;
    let conf = cloud.azure_json(
        "azure-backoff.json",
        json!({"cloudProviderBackoff": true, "cloudProviderBackoffRetries": 8,
            "cloudProviderBackoffDuration": 1, "cloudProviderBackoffExponent": 1}),
    );
    // The Nodes' addresses synced every second: a steady stream of reads to throttle.
    let args = [
        "--controllers=cloud-node,cloud-node-lifecycle,service",
        "--node-status-update-frequency=1s",
    ];
    let ccm = ccm(env, cloud, &conf, &args, "ccm-faults.log");
    let nodes: Api<Node> = Api::all(env.client());
    let node = vm.name.as_str();
    create_tainted(&nodes, node).await;
    set_ready(&nodes, node, true).await;
    let n = nodes::wait_for(
        &nodes,
        node,
        "the Node to be initialised through throttling",
        Duration::from_secs(120),
        |n| !has_taint(n, TAINT_UNINITIALIZED) && internal_ip(n).is_some(),
    )
    .await;
    assert_eq!(
        provider_id(&n),
        Some(expected_provider_id(cloud, node).as_str())
    );
    assert_eq!(internal_ip(&n), Some(vm.ip.clone()));
    eventually("a throttled call retried", MINUTE, || async {
        ccm.log()
            .contains("Azure Resource Manager call retried")
            .then_some(())
    })
    .await;
    let n = nodes.get(node).await.unwrap();
    assert!(!has_taint(&n, SHUTDOWN) && internal_ip(&n) == Some(vm.ip.clone()));

    // Every long-running change fails: the Service's Event names the first, the public IP's
    // PUT, and nothing of its load balancer is made.
    cloud
        .restart(&["--inject-operation-failure-rate", "azure=1"])
        .await;
    let (services, name) = (services(env), env.unique_name("az-failing"));
    let (_, frontend) = lb_service(&services, &name).await;
    let events: Api<Event> = Api::namespaced(env.client(), env.namespace());
    let event = eventually("the SyncLoadBalancerFailed Event", MINUTE, || async {
        let fields = format!("involvedObject.name={name}");
        let list = events
            .list(&ListParams::default().fields(&fields))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("SyncLoadBalancerFailed"))
    })
    .await;
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains(&format!("PUT publicIPAddresses/kubernetes-{frontend}"))
            && message.contains("the operation ended Failed"),
        "{message}"
    );
    let network = format!("resourceGroups/{GROUP}/providers/Microsoft.Network");
    let (status, pip) = cloud
        .get(&format!(
            "{network}/publicIPAddresses/kubernetes-{frontend}"
        ))
        .await;
    assert_eq!(status, 404, "a public IP of the failed change: {pip}");
    let (status, lb) = cloud
        .get(&format!("{network}/loadBalancers/kubernetes"))
        .await;
    assert_eq!(status, 404, "a load balancer of the failed change: {lb}");
    assert_eq!(ingress_ip(&services, &name).await, None);
    services
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the failing Service to go", MINUTE, || async {
        services.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    drop(ccm);
    let _ = nodes.delete(node, &DeleteParams::default()).await;
}
