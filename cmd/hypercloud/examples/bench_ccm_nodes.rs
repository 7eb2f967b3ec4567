//! Benchmark (run by hack/bench/ccm-nodes.sh, not a test): N Nodes carrying the uninitialized
//! taint are created directly in the envtest apiserver, a cloud-controller-manager process runs
//! against a provider that knows N instances of the same names, and this reports the time
//! until every Node is initialised, the apiserver writes per Node (from the apiserver's own
//! `apiserver_request_total`), the provider calls per Node (from the CCM's
//! `cloudprovider_api_request_duration_seconds_count`) and the CCM's peak RSS (VmHWM).
//!
//! Two providers:
//! - `fake` (default): a generated cloud-config of N instances; no cloud behind it.
//! - `local`: a real `hypercloud local-cloud serve` (free loopback ports, temporary state
//!   directory) with N servers created through the Nova API, and the CCM on
//!   `--cloud-provider=local`. Also reports the HTTP requests the local cloud answered while
//!   the CCM ran (its `localcloud_api_requests_total`) per Node, by service, method and route,
//!   and the local cloud's peak RSS. This is where the provider's batching shows: many provider
//!   calls, few cloud requests.
//! - `aws`: moto (the tagged VPC of `hypercloud_testenv::aws`, a /20 subnet holding N
//!   `m5.large` instances, Nodes named by their private DNS names as the aws provider names
//!   them) behind a recording proxy, and Amazon's EC2 metadata mock playing the first instance
//!   (its instance role gives the SDK credentials); the CCM on `--cloud-provider=aws`. Reports
//!   the EC2 requests (by action) that reached moto while the CCM ran, per Node.
//!
//! With `--kwok`, the Nodes live in a real cluster: kwok (`hypercloud_testenv::cluster`, the
//! Stages of hack/lib/kwok-stages.yaml, the kubelet's 40 s Lease) plays their kubelets, so they
//! turn Ready and keep heartbeating, and the upstream kube-controller-manager runs beside the
//! CCM. After initialisation (and `--settle` seconds) it then measures the CCM's steady state
//! over a fixed window (`--window=SECONDS`, default 300, one cloud-node address-sync period):
//! CPU (utime+stime from /proc), RSS, the apiserver requests the CCM made (the CCM runs as a
//! ServiceAccount of its own, so the apiserver's priority-and-fairness metrics
//! `apiserver_flowcontrol_dispatched_requests_total{flow_schema="service-accounts"}` count it
//! apart from kwok and the KCM, which run as admin) and the cloud requests (provider calls,
//! and with `--provider=local|aws` the requests the cloud answered), each per Node-hour.
//!
//! With `--ccm-bin=PATH` (fake or local provider, without `--kwok`) the CCM is that program
//! instead, given the same flags plus `--authentication-kubeconfig`/`--authorization-kubeconfig`
//! (hack/bench/compare-upstream.sh passes the upstream Go CCM of hack/tools/upstream-ccm; with
//! `--provider=local`, hack/bench/lb-occm.sh passes upstream's OpenStack CCM, which runs as
//! `--cloud-provider=openstack` and initialises the Nodes with its own node controller as
//! hypercloud's CCM does). With the local provider both CCMs get the same cloud.conf: the local
//! cloud's credentials and `[LoadBalancer] subnet-id` (`private-subnet`) and
//! `floating-network-id` (`public`), so both give each Service a floating IP. With
//! `--services=M`, once the Nodes are initialised, M LoadBalancer Services are created and it
//! reports the time until all have an ingress IP, the apiserver writes per Service and the
//! CCM's RSS while holding them (the CCM needs the `service` controller in `--controllers`).
//! Every run ends with one `RESULT key=value ...` line for scripts: the CCM's CPU seconds, and
//! with `HYPERCLOUD_ENVTEST_DIR` set the apiserver's and etcd's (their recorded pids); with
//! `--services` and a counted cloud, one `ROUTE ccm=.. phase=create|delete per_service=X <route>`
//! line per cloud route before it.
//!
//! With `--provider=local`, `--cloud-latency=SPEC` starts the local cloud with
//! `--inject-latency SPEC` (e.g. `30ms`, `load-balancer=30ms,network=30ms`): every answer waits
//! that long first, as a real cloud's API takes tens of milliseconds where the local cloud takes
//! one or two. `HYPERCLOUD_BENCH_CCM_LOG=FILE` appends the CCM's log to FILE.
//!
//! Usage: bench_ccm_nodes <hypercloud binary> [N] [--provider=fake|local|aws] [--kwok]
//!        [--window=SECONDS] [--ccm-bin=PATH] [--services=M] [--cloud-latency=SPEC]
//!        [extra CCM flags...]
//! Needs HYPERCLOUD_TEST_KUBECONFIG (a running envtest, `eval "$(hack/envtest.sh start)"`).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use hypercloud_testenv::cluster::{self as real_cluster, KUBELET_LABEL};
use hypercloud_testenv::process::Proc;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, Taint};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Api;
use serde_json::{json, Value};

const TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn token(kubeconfig: &str) -> Res<String> {
    let text = std::fs::read_to_string(kubeconfig)?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .map(|t| t.trim().to_string())
        .ok_or_else(|| "kubeconfig has no token user".into())
}

/// Sum of the samples of `name` whose labels contain every `(k, v)` of `want`.
fn sum(text: &str, name: &str, want: &[(&str, &str)], skip: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| series.split('{').next() == Some(name))
        .filter(|(series, _)| {
            want.iter()
                .all(|(k, v)| series.contains(&format!("{k}=\"{v}\"")))
                && !skip
                    .iter()
                    .any(|(k, v)| series.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|(_, v)| v.parse::<f64>().ok())
        .sum()
}

/// Writes to `resource` counted by the apiserver, by verb.
fn writes(text: &str, resource: &str) -> BTreeMap<String, f64> {
    ["POST", "PUT", "PATCH", "APPLY", "DELETE"]
        .iter()
        .map(|verb| {
            (
                verb.to_string(),
                sum(
                    text,
                    "apiserver_request_total",
                    &[("resource", resource), ("verb", verb)],
                    &[("dry_run", "All")],
                ),
            )
        })
        .collect()
}

async fn get_text(client: &reqwest::Client, url: &str, token: &str) -> Res<String> {
    Ok(client
        .get(url)
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?)
}

fn vm_hwm_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `localcloud_api_requests_total` series answered between two scrapes, as
/// `service method route code` → count, without the scrapes themselves (service `other`).
fn cloud_requests(before: &str, after: &str) -> BTreeMap<String, f64> {
    let parse = |text: &str| -> BTreeMap<String, f64> {
        text.lines()
            .filter_map(|l| l.strip_prefix("localcloud_api_requests_total{"))
            .filter_map(|l| l.rsplit_once("} "))
            .filter_map(|(labels, v)| {
                let get = |k: &str| {
                    labels
                        .split(&format!("{k}=\""))
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                        .unwrap_or("")
                        .to_string()
                };
                (get("service") != "other").then(|| {
                    (
                        format!(
                            "{} {} {} {}",
                            get("service"),
                            get("method"),
                            get("route"),
                            get("code")
                        ),
                        v.parse().unwrap_or(0.0),
                    )
                })
            })
            .collect()
    };
    let b = parse(before);
    parse(after)
        .into_iter()
        .map(|(k, v)| {
            let d = v - b.get(&k).unwrap_or(&0.0);
            (k, d)
        })
        .filter(|(_, d)| *d > 0.0)
        .collect()
}

/// kwok (the kubelets of the Nodes labelled for this run, with the kubelet's own 40 s Lease)
/// and the upstream kube-controller-manager (its default 50 s grace period), logs in `dir`.
fn start_cluster(kubeconfig: &str, dir: &std::path::Path, run: &str) -> Res<(Proc, Proc)> {
    let bin = real_cluster::bin_dir();
    let stages = hypercloud_testenv::repo_root().join("hack/lib/kwok-stages.yaml");
    let mut cmd = Command::new(bin.join("kwok"));
    cmd.arg(format!("--kubeconfig={kubeconfig}"))
        .arg(format!("--config={}", stages.display()))
        .arg(format!(
            "--manage-nodes-with-label-selector={KUBELET_LABEL}={run}"
        ))
        .arg("--node-lease-duration-seconds=40")
        .arg(format!(
            "--cidr={}",
            real_cluster::setting("CLUSTER_POD_CIDR")
        ));
    let kwok = Proc::spawn("kwok", cmd, dir.join("kwok.log"));
    let kcm = real_cluster::kube_controller_manager(
        std::path::Path::new(kubeconfig),
        dir,
        &["--node-monitor-grace-period=50s".to_string()],
    );
    Ok((kwok, kcm))
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A kubeconfig for a ServiceAccount of this run bound to cluster-admin, so the apiserver's
/// priority-and-fairness metrics count the CCM's requests under the flow schema
/// `service-accounts`, apart from the admin clients (kwok, the KCM: flow schema `exempt`).
async fn service_account_kubeconfig(
    client: &kube::Client,
    admin_kubeconfig: &str,
    dir: &std::path::Path,
    run: &str,
) -> Res<String> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    let name = format!("bench-ccm-{run}");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}}))?,
    )
    .await?;
    let crbs: Api<ClusterRoleBinding> = Api::all(client.clone());
    crbs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]
        }))?,
    )
    .await?;
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 7200}}))?;
    let token = sas
        .create_token_request(&name, &PostParams::default(), &request)
        .await?
        .status
        .ok_or("TokenRequest without status")?
        .token;
    // The admin kubeconfig with the token user first (hack/envtest.sh writes both users).
    let text = std::fs::read_to_string(admin_kubeconfig)?;
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .ok_or("kubeconfig without server")?;
    let ca = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .ok_or("kubeconfig without certificate-authority-data")?;
    let path = dir.join("ccm.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
        ),
    )?;
    Ok(path.display().to_string())
}

/// A child process killed (SIGKILL) and reaped when dropped, unless it already exited.
struct KillOnDrop(std::process::Child);

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;

    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The envtest control plane's processes, by the pids `hack/envtest.sh start` recorded in
/// `HYPERCLOUD_ENVTEST_DIR` (none when it is unset: CPU then reads 0).
struct ControlPlane {
    apiserver: Option<u32>,
    etcd: Option<u32>,
}

impl ControlPlane {
    fn from_env() -> Self {
        let pid = |name: &str| {
            let dir = std::env::var("HYPERCLOUD_ENVTEST_DIR").ok()?;
            std::fs::read_to_string(format!("{dir}/{name}.pid"))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        ControlPlane {
            apiserver: pid("kube-apiserver"),
            etcd: pid("etcd"),
        }
    }

    /// (kube-apiserver, etcd) CPU ticks so far.
    fn cpu_ticks(&self) -> (u64, u64) {
        let t = |p: Option<u32>| p.and_then(cpu_ticks).unwrap_or(0);
        (t(self.apiserver), t(self.etcd))
    }
}

/// Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`; 100 on Linux).
fn ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// What `--services=M` measured.
struct ServiceReport {
    count: usize,
    secs: f64,
    writes_per_service: f64,
    rss_kb: u64,
    delete_secs: f64,
    /// Creating (until every Service has ingress) and deleting (until every Service is gone and
    /// the cloud holds none of their load balancers): the provider calls (the CCM's
    /// `cloudprovider_api_request_duration_seconds_count`, by request) and, with a counted
    /// cloud, the requests the cloud answered (by service, method, route and code).
    phases: [Phase; 2],
}

/// The requests of one phase of `--services`, in all (not per Service).
#[derive(Default)]
struct Phase {
    provider_calls: BTreeMap<String, f64>,
    cloud_requests: Option<BTreeMap<String, f64>>,
    /// The local cloud's CPU seconds (API and data plane).
    cloud_cpu_secs: Option<f64>,
}

impl Phase {
    fn human(&self, name: &str, m: usize) -> String {
        let per = |total: f64| total / m as f64;
        let calls: f64 = self.provider_calls.values().sum();
        let mut out = format!(
            "  {name}: provider calls/Service {:.2} ({})",
            per(calls),
            self.provider_calls
                .iter()
                .map(|(k, v)| format!("{k}={:.2}", per(*v)))
                .collect::<Vec<_>>()
                .join(" ")
        );
        if let Some(requests) = &self.cloud_requests {
            let total: f64 = requests.values().sum();
            let cpu = self
                .cloud_cpu_secs
                .map(|s| format!(", local cloud CPU {s:.2}s"))
                .unwrap_or_default();
            out.push_str(&format!(
                "\n  {name}: cloud API requests/Service {:.2} ({total} in all{cpu})",
                per(total)
            ));
            for (k, v) in requests {
                out.push_str(&format!("\n      {:>7.2}  {k}", per(*v)));
            }
        }
        out
    }

    fn cloud_total(&self) -> f64 {
        self.cloud_requests
            .as_ref()
            .map_or(0.0, |r| r.values().sum())
    }
}

impl ServiceReport {
    fn human(&self) -> String {
        format!(
            "services:                {} LoadBalancer Services: ingress on all in {:.2}s, {:.2} CCM writes/Service, CCM RSS holding them {:.1} MiB, deleted in {:.2}s\n{}\n{}",
            self.count,
            self.secs,
            self.writes_per_service,
            self.rss_kb as f64 / 1024.0,
            self.delete_secs,
            self.phases[0].human("create", self.count),
            self.phases[1].human("delete", self.count),
        )
    }
}

/// The provider calls counted by the CCM's metrics at `url`, by request, less `initialize`.
async fn provider_calls(
    http: &reqwest::Client,
    url: &str,
    token: &str,
) -> Res<BTreeMap<String, f64>> {
    let text = get_text(http, url, token).await?;
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("cloudprovider_api_request_duration_seconds_count{"))
        .filter_map(|l| l.rsplit_once("} "))
        .filter_map(|(labels, v)| {
            let request = labels.split("request=\"").nth(1)?.split('"').next()?;
            (request != "initialize").then(|| (request.to_string(), v.parse().unwrap_or(0.0)))
        })
        .collect())
}

/// `after - before`, per key, the keys that grew.
fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).unwrap_or(&0.0)))
        .filter(|(_, d)| *d > 0.0)
        .collect()
}

/// Provider calls, cloud requests and the local cloud's CPU ticks at one moment.
type Snap = (
    BTreeMap<String, f64>,
    Option<BTreeMap<String, f64>>,
    Option<u64>,
);

/// What `hold_services` counts besides the apiserver: the CCM's provider calls, the cloud's
/// requests and, with the local cloud, its load balancers.
struct Counters<'a> {
    ccm_metrics_url: &'a str,
    cloud: Option<&'a CloudCounter<'a>>,
    local: Option<&'a LocalCloud>,
}

impl Counters<'_> {
    async fn snapshot(&self, http: &reqwest::Client, admin: &str) -> Res<Snap> {
        let calls = provider_calls(http, self.ccm_metrics_url, admin).await?;
        let cloud = match self.cloud {
            Some(c) => Some(c.by_kind(http).await?),
            None => None,
        };
        let cpu = self.local.and_then(|c| cpu_ticks(c.child.id()));
        Ok((calls, cloud, cpu))
    }
}

/// `call`, tried up to 5 times 2s apart: a loaded apiserver sometimes cuts a connection
/// (`IncompleteMessage`), which must not end a run of many minutes.
async fn retry<T, F, Fut>(what: &str, call: F) -> Res<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < 5 => {
                eprintln!("{what}: {e}; trying again");
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(e) => return Err(format!("{what}: {e}").into()),
        }
    }
}

/// The error for a CCM that exited `when`, with the end of its log (the run's temporary
/// directory, and the log with it, is gone once the error is reported).
fn ccm_exited(when: &str, status: std::process::ExitStatus, log: &std::path::Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    format!("CCM exited {when}: {status}; the end of its log:\n{tail}")
}

/// Creates `m` LoadBalancer Services (namespace `default`, labelled with the run), waits until
/// every one has an ingress IP, reads the CCM's RSS while it holds them, then deletes them and
/// waits until the CCM has released them (its finalizer gone) and, with the local cloud, until
/// the cloud holds none of their load balancers. Counts the provider calls and cloud requests
/// of each phase.
#[allow(clippy::too_many_arguments)]
async fn hold_services(
    client: &kube::Client,
    http: &reqwest::Client,
    metrics_url: &str,
    admin: &str,
    run: &str,
    m: usize,
    pid: u32,
    ccm: &mut std::process::Child,
    ccm_log: &std::path::Path,
    counters: &Counters<'_>,
) -> Res<ServiceReport> {
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let label = format!("hypercloud.io/bench={run}");
    let before = get_text(http, metrics_url, admin).await?;
    let snap0 = counters.snapshot(http, admin).await?;
    eprintln!("creating {m} LoadBalancer Services ...");
    let start = Instant::now();
    futures::stream::iter(0..m)
        .map(|i| {
            let api = api.clone();
            let svc: Service = match serde_json::from_value(json!({
                "metadata": {"name": format!("{run}-{i:05}"), "labels": {"hypercloud.io/bench": run}},
                "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "targetPort": 8080}]},
            })) {
                Ok(s) => s,
                Err(e) => return futures::future::Either::Left(async move { Err(e.into()) }),
            };
            futures::future::Either::Right(async move {
                api.create(&PostParams::default(), &svc)
                    .await
                    .map(|_| ())
                    .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { e.into() })
            })
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    let lp = ListParams::default().labels(&label);
    let secs = loop {
        let list = retry("list the Services", || api.list(&lp)).await?;
        let pending = list
            .items
            .iter()
            .filter(|s| {
                s.status
                    .as_ref()
                    .and_then(|st| st.load_balancer.as_ref())
                    .and_then(|lb| lb.ingress.as_ref())
                    .is_none_or(|i| i.is_empty())
            })
            .count();
        if pending == 0 {
            break start.elapsed().as_secs_f64();
        }
        if let Some(status) = ccm.try_wait()? {
            return Err(ccm_exited("while creating Services", status, ccm_log).into());
        }
        if start.elapsed() > Duration::from_secs(1800) {
            return Err(format!("{pending} Services without ingress after 1800s").into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = get_text(http, metrics_url, admin).await?;
    let snap1 = counters.snapshot(http, admin).await?;
    let (wb, wa) = (writes(&before, "services"), writes(&after, "services"));
    let svc_writes: f64 = wa.iter().map(|(k, v)| v - wb.get(k).unwrap_or(&0.0)).sum();
    let rss_kb = vm_rss_kb(pid).unwrap_or(0);
    eprintln!("deleting the {m} Services ...");
    let t = Instant::now();
    // One DELETE per Service, 32 at a time, as they were created. Not one delete-collection:
    // kube-apiserver marks a collection's objects one after another
    // (`--delete-collection-workers` defaults to 1), about 60 a second on 2 vCPUs, which bound
    // both CCMs' deletion more than their own work did. A Service already gone is fine.
    let dp = DeleteParams::default();
    futures::stream::iter(0..m)
        .map(|i| {
            let (api, dp) = (api.clone(), dp.clone());
            async move {
                let name = format!("{run}-{i:05}");
                retry("delete a Service", || async {
                    match api.delete(&name, &dp).await {
                        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                        other => other.map(|_| ()),
                    }
                })
                .await
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    eprintln!(
        "the {m} DELETEs answered in {:.2}s",
        t.elapsed().as_secs_f64()
    );
    let mut lookups = 0.0;
    let delete_secs = loop {
        let mut left = retry("list the Services", || api.list(&lp))
            .await?
            .items
            .len();
        if left == 0 {
            // The CCM removes its finalizer after deleting the load balancer: this only checks.
            if let Some(cloud) = counters.local {
                left = cloud.load_balancers_named(http, run).await?;
                lookups += 1.0;
            }
        }
        if left == 0 {
            break t.elapsed().as_secs_f64();
        }
        if let Some(status) = ccm.try_wait()? {
            return Err(ccm_exited("while deleting Services", status, ccm_log).into());
        }
        if t.elapsed() > Duration::from_secs(1800) {
            return Err(format!("{left} Services or load balancers left after 1800s").into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Requests after the last one that mattered (e.g. a requeue) still count: settle as above.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let snap2 = counters.snapshot(http, admin).await?;
    let tick = ticks_per_second();
    let phase = |a: &Snap, b: &Snap| Phase {
        provider_calls: delta(&a.0, &b.0),
        cloud_requests: a.1.as_ref().zip(b.1.as_ref()).map(|(a, b)| delta(a, b)),
        cloud_cpu_secs: a.2.zip(b.2).map(|(a, b)| b.saturating_sub(a) as f64 / tick),
    };
    let mut phases = [phase(&snap0, &snap1), phase(&snap1, &snap2)];
    // The bench's own look-ups (a token and a list each) are not the CCM's.
    if let Some(r) = phases[1].cloud_requests.as_mut() {
        for (k, v) in r.iter_mut() {
            if k == "load-balancer GET /load-balancer/v2/lbaas/loadbalancers 200"
                || k == "identity POST /identity/v3/auth/tokens 201"
            {
                *v -= lookups;
            }
        }
        r.retain(|_, v| *v > 0.0);
    }
    Ok(ServiceReport {
        count: m,
        secs,
        // Less the bench's own m creates: what the CCM wrote.
        writes_per_service: (svc_writes - m as f64) / m as f64,
        rss_kb,
        delete_secs,
        phases,
    })
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn vm_rss_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The CCM's steady state over `window`: CPU, RSS, its apiserver requests and the cloud
/// requests, per Node-hour.
async fn steady_state(
    http: &reqwest::Client,
    admin: &str,
    pid: u32,
    [apiserver_url, ccm_url]: [&str; 2],
    cloud: Option<&CloudCounter<'_>>,
    n: usize,
    window: Duration,
) -> Res<String> {
    let ccm_requests = |text: &str| {
        sum(
            text,
            "apiserver_flowcontrol_dispatched_requests_total",
            &[("flow_schema", "service-accounts")],
            &[],
        )
    };
    let provider_calls = |text: &str| {
        sum(
            text,
            "cloudprovider_api_request_duration_seconds_count",
            &[],
            &[("request", "initialize")],
        )
    };
    let scrape = || async {
        let api = get_text(http, apiserver_url, admin).await?;
        let ccm = get_text(http, ccm_url, admin).await?;
        let cloud = match cloud {
            Some(c) => c.total(http).await?,
            None => 0.0,
        };
        Res::Ok((api, ccm, cloud))
    };
    let ticks0 = cpu_ticks(pid).ok_or("no /proc stat for the CCM")?;
    let (api0, ccm0, cloud0) = scrape().await?;
    let t = Instant::now();
    tokio::time::sleep(window).await;
    let ticks1 = cpu_ticks(pid).ok_or("no /proc stat for the CCM")?;
    let (api1, ccm1, cloud1) = scrape().await?;
    let secs = t.elapsed().as_secs_f64();
    // USER_HZ is 100 on Linux.
    let cpu_secs = (ticks1 - ticks0) as f64 / 100.0;
    let node_hours = n as f64 * secs / 3600.0;
    let requests = ccm_requests(&api1) - ccm_requests(&api0);
    let calls = provider_calls(&ccm1) - provider_calls(&ccm0);
    let mut out = format!(
        "steady state over {secs:.0}s after initialisation (kwok Nodes Ready and heartbeating):\n\
         \x20 ccm CPU:                 {:.2}% of a core ({cpu_secs:.2} CPU-s)\n\
         \x20 ccm RSS:                 {:.1} MiB (peak {:.1} MiB)\n\
         \x20 apiserver requests:      {requests} in all, {:.3} per Node-hour (flow schema service-accounts)\n\
         \x20 provider calls:          {calls} in all, {:.3} per Node-hour",
        100.0 * cpu_secs / secs,
        vm_rss_kb(pid).unwrap_or(0) as f64 / 1024.0,
        vm_hwm_kb(pid).unwrap_or(0) as f64 / 1024.0,
        requests / node_hours,
        calls / node_hours,
    );
    if cloud.is_some() {
        let cloud = cloud1 - cloud0;
        out.push_str(&format!(
            "\n  cloud API requests:      {cloud} in all, {:.3} per Node-hour",
            cloud / node_hours
        ));
    }
    Ok(out)
}

/// Where the cloud requests are counted: the local cloud's own metrics, or the actions the
/// proxy in front of moto recorded.
enum CloudCounter<'a> {
    Local(String),
    Aws(&'a hypercloud_testenv::aws::FaultProxy),
}

impl CloudCounter<'_> {
    /// Requests so far, by kind.
    async fn by_kind(&self, http: &reqwest::Client) -> Res<BTreeMap<String, f64>> {
        match self {
            CloudCounter::Local(url) => Ok(cloud_requests("", &get_text(http, url, "").await?)),
            CloudCounter::Aws(proxy) => {
                let mut m = BTreeMap::new();
                for a in proxy.actions() {
                    *m.entry(a).or_insert(0.0) += 1.0;
                }
                Ok(m)
            }
        }
    }

    async fn total(&self, http: &reqwest::Client) -> Res<f64> {
        Ok(self.by_kind(http).await?.values().sum())
    }
}

/// moto with N cluster instances behind a recording proxy, and the metadata mock.
struct Aws {
    _moto: hypercloud_testenv::aws::Moto,
    _mock: hypercloud_testenv::aws::MetadataMock,
    proxy: hypercloud_testenv::aws::FaultProxy,
    /// The Node names: the instances' private DNS names.
    names: Vec<String>,
    conf: String,
}

impl Aws {
    async fn start(n: usize) -> Res<Aws> {
        use hypercloud_testenv::aws as t;
        let moto = t::Moto::start();
        let (vpc, _) = moto.create_network(t::CLUSTER);
        let described = moto.cli(&["ec2", "describe-vpcs", "--vpc-ids", &vpc]);
        let cidr = described["Vpcs"][0]["CidrBlock"]
            .as_str()
            .ok_or("moto's VPC has no CidrBlock")?
            .replace(".0.0/16", ".16.0/20");
        let subnet = moto.cli(&[
            "ec2",
            "create-subnet",
            "--vpc-id",
            &vpc,
            "--cidr-block",
            &cidr,
            "--availability-zone",
            t::ZONE,
        ]);
        let subnet = subnet["Subnet"]["SubnetId"]
            .as_str()
            .ok_or("no SubnetId")?
            .to_owned();
        let instances = moto.run_instances(&subnet, n, Some(t::CLUSTER), "m5.large");
        let names = instances
            .iter()
            .map(|i| {
                i["PrivateDnsName"]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or("an instance without PrivateDnsName")
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut me = t::MockInstance::from_moto(&instances[0]);
        me.role = Some(t::role("AKIDFROMIMDSROLE"));
        let mock = t::MetadataMock::start(&me, false);
        let proxy = t::FaultProxy::start(moto.url()).await;
        let conf = t::cloud_conf(proxy.url(), mock.url(), "");
        Ok(Aws {
            _moto: moto,
            _mock: mock,
            proxy,
            names,
            conf,
        })
    }
}

/// A running `hypercloud local-cloud serve` with N servers.
struct LocalCloud {
    child: std::process::Child,
    api_url: String,
}

impl LocalCloud {
    /// Starts the server on free loopback ports in `dir` and waits until Keystone answers.
    /// `latency`: the local cloud's `--inject-latency` (a real cloud's API answers in tens of
    /// milliseconds, the local cloud in one or two).
    async fn start(
        bin: &str,
        dir: &std::path::Path,
        http: &reqwest::Client,
        latency: Option<&str>,
    ) -> Res<Self> {
        let state = dir.join("cloud");
        let log = std::fs::File::create(dir.join("local-cloud.log"))?;
        let child = Command::new(bin)
            .args(["local-cloud", "serve", "--listen", "127.0.0.1:0"])
            .args(
                latency
                    .map(|l| ["--inject-latency", l])
                    .into_iter()
                    .flatten(),
            )
            .args(["--metadata-listen", "127.0.0.1:0", "--state-dir"])
            .arg(&state)
            .env_remove("HYPERCLOUD_LOCAL_CLOUD_STATE_DIR")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let mut cloud = LocalCloud {
            child,
            api_url: String::new(),
        };
        let pid = cloud.child.id();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let info = std::fs::read_to_string(state.join("server.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok());
            if let Some(info) = info.filter(|i| i["pid"] == pid) {
                let url = info["api_url"].as_str().unwrap_or_default().to_string();
                let up = http.get(format!("{url}/identity/v3")).send().await;
                if up.is_ok_and(|r| r.status().is_success()) {
                    cloud.api_url = url;
                    return Ok(cloud);
                }
            }
            if let Some(status) = cloud.child.try_wait()? {
                return Err(
                    format!("local cloud exited: {status}; log in {}", dir.display()).into(),
                );
            }
            if Instant::now() > deadline {
                return Err(format!("local cloud did not start; log in {}", dir.display()).into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A token of the default admin user (the one the `local` provider uses).
    async fn token(&self, http: &reqwest::Client) -> Res<String> {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}},
            "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}});
        let r = http
            .post(format!("{}/identity/v3/auth/tokens", self.api_url))
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
        Ok(r.headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .ok_or("no X-Subject-Token in the answer")?
            .to_string())
    }

    /// Creates a server per name with `POST /servers`, many at a time.
    async fn create_servers(&self, http: &reqwest::Client, names: &[String]) -> Res<()> {
        let token = self.token(http).await?;
        let url = format!("{}/compute/v2.1/servers", self.api_url);
        futures::stream::iter(names)
            .map(|name| {
                let body = json!({"server": {
                    "name": name, "flavorRef": "m1.small", "availability_zone": "nova"}});
                let req = http.post(&url).header("x-auth-token", &token).json(&body);
                async move {
                    let r = req.send().await?;
                    if r.status().as_u16() != 202 {
                        let status = r.status();
                        return Err(format!(
                            "creating server {name}: {status}: {}",
                            r.text().await.unwrap_or_default()
                        )
                        .into());
                    }
                    Res::Ok(())
                }
            })
            .buffer_unordered(32)
            .try_collect::<Vec<_>>()
            .await?;
        Ok(())
    }

    /// The cloud.conf both CCMs get: the default admin's credentials and the default
    /// networks' ids (`[LoadBalancer] subnet-id` of `private-subnet`, `floating-network-id` of
    /// `public`), looked up with one token and two Neutron lists.
    async fn cloud_conf(&self, http: &reqwest::Client) -> Res<String> {
        let token = self.token(http).await?;
        let id_of = |kind: &'static str, name: &'static str| {
            let req = http
                .get(format!("{}/network/v2.0/{kind}?name={name}", self.api_url))
                .header("x-auth-token", &token);
            async move {
                let list: Value = req.send().await?.error_for_status()?.json().await?;
                Res::Ok(
                    list[kind][0]["id"]
                        .as_str()
                        .ok_or_else(|| format!("the local cloud has no {kind} named {name}"))?
                        .to_string(),
                )
            }
        };
        let subnet = id_of("subnets", "private-subnet").await?;
        let public = id_of("networks", "public").await?;
        Ok(format!(
            "[Global]\nauth-url = {}/identity/v3\nusername = admin\npassword = hypercloud\n\
             user-domain-name = Default\ntenant-name = demo\ntenant-domain-name = Default\n\
             region = RegionOne\n\n[LoadBalancer]\nsubnet-id = {subnet}\nfloating-network-id = {public}\n",
            self.api_url
        ))
    }

    fn metrics_url(&self) -> String {
        format!("{}/metrics", self.api_url)
    }

    /// How many load balancers the cloud holds whose name contains `part` (one token request
    /// and one Octavia list).
    async fn load_balancers_named(&self, http: &reqwest::Client, part: &str) -> Res<usize> {
        let token = self.token(http).await?;
        let list: Value = http
            .get(format!(
                "{}/load-balancer/v2/lbaas/loadbalancers",
                self.api_url
            ))
            .header("x-auth-token", &token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(list["loadbalancers"]
            .as_array()
            .ok_or("Octavia's list without loadbalancers")?
            .iter()
            .filter(|lb| lb["name"].as_str().is_some_and(|n| n.contains(part)))
            .count())
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for LocalCloud {
    fn drop(&mut self) {
        // After `stop` this finds the process reaped; on an early error it ends it.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[tokio::main]
async fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let bin = args
        .next()
        .ok_or("usage: bench_ccm_nodes <hypercloud> [N] [ccm flags...]")?;
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1000);
    let mut provider = "fake".to_string();
    let mut extra: Vec<String> = Vec::new();
    let mut kwok = false;
    let mut window_secs: u64 = 300;
    let mut ccm_bin: Option<String> = None;
    let mut services: usize = 0;
    let mut cloud_latency: Option<String> = None;
    while let Some(a) = args.next() {
        if let Some(v) = a.strip_prefix("--cloud-latency=") {
            cloud_latency = Some(v.to_string());
            continue;
        }
        if let Some(v) = a.strip_prefix("--ccm-bin=") {
            ccm_bin = Some(v.to_string());
            continue;
        }
        if let Some(v) = a.strip_prefix("--services=") {
            services = v.parse().map_err(|e| format!("--services={v}: {e}"))?;
            if services > 100_000 {
                return Err(format!("--services={v}: want at most 100000").into());
            }
            continue;
        }
        if a == "--kwok" {
            kwok = true;
            continue;
        }
        if let Some(v) = a.strip_prefix("--window=") {
            window_secs = v.parse().map_err(|e| format!("--window={v}: {e}"))?;
            if !(10..=7200).contains(&window_secs) {
                return Err(format!("--window={v}: want 10 to 7200 seconds").into());
            }
            continue;
        }
        match a.strip_prefix("--provider") {
            Some(v) if v.starts_with('=') => provider = v[1..].to_string(),
            Some("") => provider = args.next().ok_or("--provider needs a value")?,
            _ => extra.push(a),
        }
    }
    if !["fake", "local", "aws"].contains(&provider.as_str()) {
        return Err(format!("--provider={provider}: want fake, local or aws").into());
    }
    if ccm_bin.is_some() && (provider == "aws" || kwok) {
        return Err("--ccm-bin: only with --provider=fake or local and without --kwok".into());
    }
    if cloud_latency.is_some() && provider != "local" {
        return Err(
            "--cloud-latency: only with --provider=local (the local cloud's --inject-latency)"
                .into(),
        );
    }
    let control_plane = ControlPlane::from_env();
    let kubeconfig = std::env::var("HYPERCLOUD_TEST_KUBECONFIG")
        .map_err(|_| "HYPERCLOUD_TEST_KUBECONFIG not set (eval \"$(hack/envtest.sh start)\")")?;
    let admin = token(&kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig)?,
        &Default::default(),
    )
    .await?;
    let apiserver = config.cluster_url.to_string();
    let client = kube::Client::try_from(config)?;
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()?;
    let nodes: Api<Node> = Api::all(client.clone());

    let run = format!("b{}", std::process::id());
    let label = format!("hypercloud.io/bench={run}");
    let dir = tempfile::tempdir()?;
    let mut names: Vec<String> = (0..n).map(|i| format!("{run}-{i:04}")).collect();
    let mut local = None;
    let mut aws = None;
    let mut create_secs = 0.0;
    let cloud_config = if provider == "local" {
        eprintln!("starting the local cloud and creating {n} servers ...");
        let cloud = LocalCloud::start(&bin, dir.path(), &http, cloud_latency.as_deref()).await?;
        let t = Instant::now();
        cloud.create_servers(&http, &names).await?;
        create_secs = t.elapsed().as_secs_f64();
        eprintln!("created in {create_secs:.1}s");
        let path = dir.path().join("cloud.conf");
        std::fs::write(&path, cloud.cloud_conf(&http).await?)?;
        local = Some(cloud);
        path
    } else if provider == "aws" {
        eprintln!("starting moto and the metadata mock, running {n} instances ...");
        let t = Instant::now();
        let cloud = Aws::start(n).await?;
        create_secs = t.elapsed().as_secs_f64();
        eprintln!("created in {create_secs:.1}s");
        names.clone_from(&cloud.names);
        let path = dir.path().join("cloud.conf");
        std::fs::write(&path, &cloud.conf)?;
        aws = Some(cloud);
        path
    } else {
        let mut cfg = String::from("region: RegionOne\nzone: nova\ninstances:\n");
        for (i, name) in names.iter().enumerate() {
            cfg.push_str(&format!(
                "  - {{name: {name}, instanceType: m1.small, addresses: [{{type: InternalIP, address: 10.{}.{}.{}}}]}}\n",
                i / 65536 % 256,
                i / 256 % 256,
                i % 256
            ));
        }
        let path = dir.path().join("fake.yaml");
        std::fs::write(&path, cfg)?;
        path
    };

    eprintln!("creating {n} tainted Nodes ...");
    let t = Instant::now();
    futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let nodes = nodes.clone();
            let run = run.clone();
            async move {
                let mut labels = BTreeMap::from([("hypercloud.io/bench".to_string(), run.clone())]);
                if kwok {
                    // The power switch's label: every instance of the bench runs.
                    labels.insert(KUBELET_LABEL.to_string(), run);
                }
                let node = Node {
                    metadata: ObjectMeta {
                        name: Some(name),
                        labels: Some(labels),
                        ..Default::default()
                    },
                    spec: Some(NodeSpec {
                        taints: Some(vec![Taint {
                            key: TAINT.into(),
                            value: Some("true".into()),
                            effect: "NoSchedule".into(),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                nodes
                    .create(&PostParams::default(), &node)
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    eprintln!("created in {:.1}s", t.elapsed().as_secs_f64());

    let mut cluster = None;
    let mut ccm_kubeconfig = kubeconfig.clone();
    if kwok {
        cluster = Some(start_cluster(&kubeconfig, dir.path(), &run)?);
        eprintln!("waiting for kwok to report the {n} Nodes Ready ...");
        let t = Instant::now();
        let lp = ListParams::default().labels(&label);
        loop {
            let ready = nodes
                .list(&lp)
                .await?
                .items
                .iter()
                .filter(|n| node_ready(n))
                .count();
            if ready == n {
                break;
            }
            if t.elapsed() > Duration::from_secs(900) {
                return Err(format!("only {ready} of {n} Nodes Ready after 900s").into());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        eprintln!("Ready in {:.1}s", t.elapsed().as_secs_f64());
        ccm_kubeconfig = service_account_kubeconfig(&client, &kubeconfig, dir.path(), &run).await?;
    }

    let metrics_url = format!("{}metrics", apiserver);
    let before = get_text(&http, &metrics_url, &admin).await?;
    let counter = match (&local, &aws) {
        (Some(c), _) => Some(CloudCounter::Local(c.metrics_url())),
        (_, Some(a)) => Some(CloudCounter::Aws(&a.proxy)),
        _ => None,
    };
    let cloud_before = match &counter {
        Some(c) => c.by_kind(&http).await?,
        None => BTreeMap::new(),
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = std::fs::File::create(dir.path().join("ccm.log"))?;
    let cp_before = control_plane.cpu_ticks();
    let start = Instant::now();
    let mut ccm = match &ccm_bin {
        Some(path) => {
            let mut c = Command::new(path);
            // Its cloud-provider webhook server would listen on 0.0.0.0:10260: off.
            c.arg(format!("--authentication-kubeconfig={ccm_kubeconfig}"))
                .arg(format!("--authorization-kubeconfig={ccm_kubeconfig}"))
                .arg("--webhook-secure-port=0");
            c
        }
        None => {
            let mut c = Command::new(&bin);
            c.arg("cloud-controller-manager");
            c
        }
    };
    // Upstream's OpenStack CCM knows the local cloud as `openstack` (hypercloud's `local` is
    // its `openstack` provider preset to the local cloud, overridden by the same cloud.conf).
    let ccm_provider = match (&ccm_bin, provider.as_str()) {
        (Some(_), "local") => "openstack",
        _ => provider.as_str(),
    };
    let ccm = ccm
        .arg(format!("--cloud-provider={ccm_provider}"))
        .arg(format!("--cloud-config={}", cloud_config.display()))
        .arg(format!("--kubeconfig={ccm_kubeconfig}"))
        .arg(format!("--secure-port={port}"))
        .arg("--bind-address=127.0.0.1")
        .arg("--leader-elect=false")
        .args(&extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    // Killed however this function returns (an error must not leave a CCM running).
    let mut ccm = KillOnDrop(ccm);
    let pid = ccm.id();

    let lp = ListParams::default().labels(&label);
    let mut peak_kb = 0;
    let elapsed = loop {
        let full = nodes.list(&lp).await?;
        let left = full
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == TAINT))
            })
            .count();
        peak_kb = peak_kb.max(vm_hwm_kb(pid).unwrap_or(0));
        if left == 0 {
            break start.elapsed();
        }
        if let Some(status) = ccm.try_wait()? {
            return Err(ccm_exited("early", status, &dir.path().join("ccm.log")).into());
        }
        if start.elapsed() > Duration::from_secs(900) {
            return Err(format!("{left} Nodes still tainted after 900s").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Let trailing writes (events) land before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ccm_cpu_init = cpu_ticks(pid).unwrap_or(0);
    let cp_init = control_plane.cpu_ticks();
    let ccm_metrics_url = format!("https://127.0.0.1:{port}/metrics");
    let ccm_metrics = get_text(&http, &ccm_metrics_url, &admin)
        .await
        .unwrap_or_default();
    let after = get_text(&http, &metrics_url, &admin).await?;
    peak_kb = peak_kb.max(vm_hwm_kb(pid).unwrap_or(0));
    let svc_report = if services > 0 {
        Some(
            hold_services(
                &client,
                &http,
                &metrics_url,
                &admin,
                &run,
                services,
                pid,
                &mut ccm,
                &dir.path().join("ccm.log"),
                &Counters {
                    ccm_metrics_url: &ccm_metrics_url,
                    cloud: counter.as_ref(),
                    local: local.as_ref(),
                },
            )
            .await?,
        )
    } else {
        None
    };
    let steady = if kwok {
        eprintln!("settling 30s, then measuring the steady state over {window_secs}s ...");
        tokio::time::sleep(Duration::from_secs(30)).await;
        let report = steady_state(
            &http,
            &admin,
            pid,
            [&metrics_url, &ccm_metrics_url],
            counter.as_ref(),
            n,
            Duration::from_secs(window_secs),
        )
        .await?;
        if let Some(status) = ccm.try_wait()? {
            return Err(
                ccm_exited("during the window", status, &dir.path().join("ccm.log")).into(),
            );
        }
        Some(report)
    } else {
        None
    };
    let ccm_cpu_end = cpu_ticks(pid).unwrap_or(0);
    let cp_end = control_plane.cpu_ticks();
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = ccm.wait();
    // HYPERCLOUD_BENCH_CCM_LOG=<file>: keep the CCM's log (appended run after run) to see
    // where a phase's time went.
    if let Some(keep) = std::env::var_os("HYPERCLOUD_BENCH_CCM_LOG") {
        let copied = std::fs::read(dir.path().join("ccm.log")).and_then(|log| {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&keep)?
                .write_all(&log)
        });
        if let Err(e) = copied {
            eprintln!(
                "could not keep the CCM log in {}: {e}",
                keep.to_string_lossy()
            );
        }
    }
    let requests = match &counter {
        Some(c) => {
            let mut after = c.by_kind(&http).await?;
            for (k, v) in &cloud_before {
                if let Some(a) = after.get_mut(k) {
                    *a -= v;
                }
            }
            after.retain(|_, v| *v > 0.0);
            Some(after)
        }
        None => None,
    };
    drop(counter);
    let cloud_hwm = local.take().map(|c| {
        let hwm = vm_hwm_kb(c.child.id()).unwrap_or(0);
        c.stop();
        hwm
    });

    let (wb, wa) = (writes(&before, "nodes"), writes(&after, "nodes"));
    let node_writes: f64 = wa.iter().map(|(k, v)| v - wb.get(k).unwrap_or(&0.0)).sum();
    let per_verb: Vec<String> = wa
        .iter()
        .map(|(k, v)| format!("{k}={}", v - wb.get(k).unwrap_or(&0.0)))
        .collect();
    let event_writes = sum(
        &after,
        "apiserver_request_total",
        &[("resource", "events")],
        &[],
    ) - sum(
        &before,
        "apiserver_request_total",
        &[("resource", "events")],
        &[],
    );
    let cloud_calls = sum(
        &ccm_metrics,
        "cloudprovider_api_request_duration_seconds_count",
        &[],
        &[("request", "initialize")],
    );
    let mut by_request: Vec<String> = ccm_metrics
        .lines()
        .filter(|l| l.starts_with("cloudprovider_api_request_duration_seconds_count{"))
        .map(|l| l.replace("cloudprovider_api_request_duration_seconds_count", ""))
        .collect();
    by_request.sort();

    println!("nodes:                   {n}");
    println!("provider:                {provider}");
    if provider == "local" {
        println!("servers created in:      {create_secs:.1}s (POST /servers, 32 at a time)");
    }
    if provider == "aws" {
        println!("instances created in:    {create_secs:.1}s (moto, one run-instances)");
    }
    println!(
        "ccm flags:               {}",
        if extra.is_empty() {
            "(defaults)".into()
        } else {
            extra.join(" ")
        }
    );
    println!("time to all initialised: {:.2}s", elapsed.as_secs_f64());
    println!(
        "apiserver writes/node:   {:.2} on nodes ({}), {:.2} on events",
        node_writes / n as f64,
        per_verb.join(" "),
        event_writes / n as f64
    );
    println!(
        "provider calls/node:     {:.3} ({})",
        cloud_calls / n as f64,
        by_request.join(" ")
    );
    if let Some(requests) = &requests {
        let total: f64 = requests.values().sum();
        let detail: Vec<String> = requests.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "cloud API requests/node: {:.3} ({total} in all: {})",
            total / n as f64,
            detail.join(", ")
        );
    }
    println!(
        "ccm peak RSS:            {:.1} MiB",
        peak_kb as f64 / 1024.0
    );
    if let Some(hwm) = &cloud_hwm {
        println!(
            "local cloud peak RSS:    {:.1} MiB (including creating the servers)",
            *hwm as f64 / 1024.0
        );
    }

    if let Some(report) = steady {
        println!("{report}");
    }
    let tick = ticks_per_second();
    let secs = |t: u64| t as f64 / tick;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load1 = load.split_whitespace().next().unwrap_or("0");
    let mut result = format!(
        "RESULT ccm={} nodes={n} init_s={:.2} node_writes_per_node={:.3} events_per_node={:.3} ccm_peak_rss_mib={:.1} ccm_cpu_init_s={:.2} apiserver_cpu_init_s={:.2} etcd_cpu_init_s={:.2} load1={load1}",
        if ccm_bin.is_some() { "upstream" } else { "hypercloud" },
        elapsed.as_secs_f64(),
        node_writes / n as f64,
        event_writes / n as f64,
        peak_kb as f64 / 1024.0,
        secs(ccm_cpu_init),
        secs(cp_init.0.saturating_sub(cp_before.0)),
        secs(cp_init.1.saturating_sub(cp_before.1)),
    );
    if let Some(r) = &svc_report {
        println!("{}", r.human());
        let who = if ccm_bin.is_some() {
            "upstream"
        } else {
            "hypercloud"
        };
        for (phase, p) in ["create", "delete"].iter().zip(&r.phases) {
            for (route, v) in p.cloud_requests.iter().flatten() {
                println!(
                    "ROUTE ccm={who} phase={phase} per_service={:.3} {route}",
                    v / r.count as f64
                );
            }
        }
        result.push_str(&format!(
            " services={services} svc_s={:.2} svc_delete_s={:.2} svc_calls_create={:.3} svc_calls_delete={:.3} svc_cloud_create={:.3} svc_cloud_delete={:.3} svc_writes_per_service={:.3} ccm_rss_holding_mib={:.1} ccm_cpu_svc_s={:.2} apiserver_cpu_svc_s={:.2} etcd_cpu_svc_s={:.2}",
            r.secs,
            r.delete_secs,
            r.phases[0].provider_calls.values().sum::<f64>() / r.count as f64,
            r.phases[1].provider_calls.values().sum::<f64>() / r.count as f64,
            r.phases[0].cloud_total() / r.count as f64,
            r.phases[1].cloud_total() / r.count as f64,
            r.writes_per_service,
            r.rss_kb as f64 / 1024.0,
            secs(ccm_cpu_end.saturating_sub(ccm_cpu_init)),
            secs(cp_end.0.saturating_sub(cp_init.0)),
            secs(cp_end.1.saturating_sub(cp_init.1)),
        ));
    }
    println!("{result}");
    drop(cluster);

    eprintln!("deleting the Nodes ...");
    nodes
        .delete_collection(&DeleteParams::default(), &lp)
        .await?;
    Ok(())
}
