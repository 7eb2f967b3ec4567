//! Benchmark (run by hack/bench/ccm-nodes.sh, not a test): N Nodes carrying the uninitialized
//! taint are created directly in the envtest apiserver, a cloud-controller-manager process runs
//! against the fake provider with a generated cloud-config of N instances, and this reports
//! the time until every Node is initialised, the apiserver writes per Node (from the
//! apiserver's own `apiserver_request_total`), the cloud calls per Node (from the CCM's
//! `cloudprovider_api_request_duration_seconds_count`) and the CCM's peak RSS (VmHWM).
//!
//! Usage: bench_ccm_nodes <hypercloud binary> [N] [extra CCM flags...]
//! Needs HYPERCLOUD_TEST_KUBECONFIG (a running envtest, `eval "$(hack/envtest.sh start)"`).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Api;

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

#[tokio::main]
async fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let bin = args
        .next()
        .ok_or("usage: bench_ccm_nodes <hypercloud> [N] [ccm flags...]")?;
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1000);
    let extra: Vec<String> = args.collect();
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
    let mut cfg = String::from("region: RegionOne\nzone: nova\ninstances:\n");
    for i in 0..n {
        cfg.push_str(&format!(
            "  - {{name: {run}-{i:04}, instanceType: m1.small, addresses: [{{type: InternalIP, address: 10.{}.{}.{}}}]}}\n",
            i / 65536 % 256,
            i / 256 % 256,
            i % 256
        ));
    }
    let cloud_config = dir.path().join("fake.yaml");
    std::fs::write(&cloud_config, cfg)?;

    eprintln!("creating {n} tainted Nodes ...");
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let nodes = nodes.clone();
            let run = run.clone();
            async move {
                let node = Node {
                    metadata: ObjectMeta {
                        name: Some(format!("{run}-{i:04}")),
                        labels: Some([("hypercloud.io/bench".to_string(), run)].into()),
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

    let metrics_url = format!("{}metrics", apiserver);
    let before = get_text(&http, &metrics_url, &admin).await?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = std::fs::File::create(dir.path().join("ccm.log"))?;
    let start = Instant::now();
    let mut ccm = Command::new(&bin)
        .arg("cloud-controller-manager")
        .arg("--cloud-provider=fake")
        .arg(format!("--cloud-config={}", cloud_config.display()))
        .arg(format!("--kubeconfig={kubeconfig}"))
        .arg(format!("--secure-port={port}"))
        .arg("--bind-address=127.0.0.1")
        .arg("--leader-elect=false")
        .args(&extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
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
            return Err(format!(
                "CCM exited early: {status}; log in {}",
                dir.path().display()
            )
            .into());
        }
        if start.elapsed() > Duration::from_secs(900) {
            return Err(format!("{left} Nodes still tainted after 900s").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Let trailing writes (events) land before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ccm_metrics = get_text(&http, &format!("https://127.0.0.1:{port}/metrics"), &admin).await?;
    let after = get_text(&http, &metrics_url, &admin).await?;
    peak_kb = peak_kb.max(vm_hwm_kb(pid).unwrap_or(0));
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = ccm.wait();

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
        "cloud calls/node:        {:.3} ({})",
        cloud_calls / n as f64,
        by_request.join(" ")
    );
    println!(
        "ccm peak RSS:            {:.1} MiB",
        peak_kb as f64 / 1024.0
    );

    eprintln!("deleting the Nodes ...");
    nodes
        .delete_collection(&DeleteParams::default(), &lp)
        .await?;
    Ok(())
}
