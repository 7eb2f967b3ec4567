//! The trace view served on loopback: trace lines appended to a file and a Node changed on
//! the real apiserver both reach `/api/events`, in order; bad requests and addresses are
//! refused by name; the page's own files carry a policy that keeps it on its origin.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use hypercloud_testenv::TestEnv;
use hypercloud_trace::live::Source;
use hypercloud_trace::serve::{serve, Config, Error};
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

fn record(ts: u64, method: &str, node: &str) -> String {
    json!({"ts_unix_ms": ts, "component": "cloud-controller-manager", "provider": "local",
           "method": method, "args": {"node": node}, "result": null, "error": null,
           "latency_ms": 2.5})
    .to_string()
}

struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

async fn start(sources: Vec<Source>, client: Option<kube::Client>) -> Running {
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("address"),
        sources,
        comparison: None,
        max_events: 1000,
        title: "test".into(),
        poll_interval: Duration::from_millis(20),
    };
    let task = tokio::spawn(serve(
        config,
        client,
        move |a| {
            let _ = addr_tx.send(a);
        },
        async move {
            let _ = stopped.await;
        },
    ));
    let addr = tokio::time::timeout(Duration::from_secs(10), addr_rx)
        .await
        .expect("the view listens within 10 s")
        .expect("address sent");
    Running {
        addr,
        stop: Some(stop),
        task,
    }
}

async fn events(addr: SocketAddr) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page: Value = reqwest::get(format!("http://{addr}/api/events?after={after}&limit=7"))
            .await
            .expect("GET /api/events")
            .json()
            .await
            .expect("JSON");
        let batch = page["events"].as_array().cloned().unwrap_or_default();
        after = page["next"].as_u64().expect("next");
        if batch.is_empty() {
            return out;
        }
        out.extend(batch);
    }
}

/// Waits until `check` holds for the events served (10 s).
async fn until(addr: SocketAddr, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = events(addr).await;
        if check(&got) {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; events: {got:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn node_states(events: &[Value], name: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "object" && e["kind"] == "Node" && e["name"] == name)
        .cloned()
        .collect()
}

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized:NoSchedule";

#[tokio::test]
async fn calls_and_node_changes_reach_the_page_in_order() {
    let env = TestEnv::new("trace-serve").await.expect("test env");
    let dir = tempfile::tempdir().expect("tempdir");
    let name = env.unique_name("traced-node");
    let trace = dir.path().join("trace-cloud-controller-manager.jsonl");
    std::fs::write(&trace, record(1, "instance_metadata", &name) + "\n").expect("write");
    let view = start(
        vec![Source {
            path: dir.path().to_path_buf(),
            layout: None,
        }],
        Some(env.client()),
    )
    .await;

    let nodes: Api<Node> = Api::all(env.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]}
    }))
    .expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create Node");
    until(view.addr, "the tainted Node", |e| {
        node_states(e, &name)
            .iter()
            .any(|n| n["summary"]["taints"][0] == UNINITIALIZED)
    })
    .await;

    // What the cloud-node controller does: providerID set, taint gone; and its call traced.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&trace)
        .expect("open");
    writeln!(f, "{}", record(2, "instance_exists_by_provider_id", &name)).expect("append");
    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": "local:///i-1", "taints": null}})),
        )
        .await
        .expect("initialise the Node");
    let got = until(view.addr, "the initialised Node and both calls", |e| {
        node_states(e, &name)
            .last()
            .is_some_and(|n| n["summary"]["provider_id"] == "local:///i-1")
            && e.iter().filter(|e| e["type"] == "call").count() == 2
    })
    .await;
    let states = node_states(&got, &name);
    assert_eq!(
        states.first().map(|n| &n["summary"]["taints"][0]),
        Some(&json!(UNINITIALIZED))
    );
    assert_eq!(
        states.last().map(|n| &n["summary"]["taints"]),
        Some(&json!([]))
    );
    let calls: Vec<_> = got
        .iter()
        .filter(|e| e["type"] == "call")
        .map(|e| {
            (
                e["method"].clone(),
                e["service"].clone(),
                e["args"]["node"].clone(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (json!("instance_metadata"), json!("Instances"), json!(name)),
            (
                json!("instance_exists_by_provider_id"),
                json!("Instances"),
                json!(name)
            ),
        ]
    );
    let seqs: Vec<u64> = got.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "seq numbers in order: {seqs:?}"
    );

    nodes
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    until(view.addr, "the Node's deletion", |e| {
        node_states(e, &name)
            .last()
            .is_some_and(|n| n["deleted"] == true)
    })
    .await;

    // The page and its policy; a bad query named.
    let page = reqwest::get(format!("http://{}/", view.addr))
        .await
        .expect("GET /");
    let csp = page
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(csp.starts_with("default-src 'self'"), "{csp}");
    assert!(page.text().await.expect("body").contains("app.js"));
    let bad = reqwest::get(format!("http://{}/api/events?limit=0", view.addr))
        .await
        .expect("GET");
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.expect("body").contains("limit=\"0\""));
    let info: Value = reqwest::get(format!("http://{}/api/info", view.addr))
        .await
        .expect("GET /api/info")
        .json()
        .await
        .expect("JSON");
    assert_eq!(info["objects"], true);
    assert_eq!(
        info["files"][0]["read_bytes"],
        info["files"][0]["size_bytes"]
    );

    let Running { stop, task, .. } = view;
    drop(stop);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("stops when told")
        .expect("task")
        .expect("served");
    env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn only_loopback_is_served_and_a_file_not_a_trace_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |listen: &str, path: std::path::PathBuf| Config {
        listen: listen.parse().expect("address"),
        sources: vec![Source { path, layout: None }],
        comparison: None,
        max_events: 100,
        title: String::new(),
        poll_interval: Duration::from_millis(20),
    };
    let err = serve(
        config("0.0.0.0:0", dir.path().into()),
        None,
        |_| {},
        async {},
    )
    .await
    .expect_err("0.0.0.0 refused");
    assert!(matches!(err, Error::NotLoopback(_)), "{err}");
    let not_trace = dir.path().join("x.jsonl");
    std::fs::write(&not_trace, "hello\n").expect("write");
    let err = serve(config("127.0.0.1:0", not_trace), None, |_| {}, async {})
        .await
        .expect_err("not a trace");
    assert!(
        err.to_string()
            .contains("x.jsonl:1: not a cloud-call trace record"),
        "{err}"
    );
}
