//! The Mesos dialect's `/state` against the shape the Mesos HTTP endpoint documentation gives
//! (`docs/endpoints/master/state.md`, the JSON of `MasterInfo` and the agents' entries): each
//! documented field is there with the JSON type Mesos renders (numbers as JSON numbers, the
//! resources as scalars and the `ports` range as text), and the agents follow the servers.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::TestCloud;

/// `field` of `v` is there and `kind` (`"string"`, `"number"`, `"bool"`, `"array"`, `"object"`).
fn has(v: &Value, field: &str, kind: &str) {
    let f = &v[field];
    let ok = match kind {
        "string" => f.is_string(),
        "number" => f.is_number(),
        "bool" => f.is_boolean(),
        "array" => f.is_array(),
        "object" => f.is_object(),
        _ => unreachable!("{kind}"),
    };
    assert!(ok, "{field} should be a {kind}: {v}");
}

#[tokio::test]
async fn state_has_the_documented_shape_and_follows_the_servers() {
    let c = TestCloud::start_with(|mut conf| {
        conf.mesos_cluster = Some("prod-east".into());
        conf
    })
    .await;
    let a = c.create_server("agent-a", json!({})).await;
    let b = c
        .create_server(
            "agent-b",
            json!({"metadata": {"mesos-hostname": "localhost", "mesos-attribute-rack": "r1", "mesos-attribute-slots": "4"}}),
        )
        .await;
    let state = c.get("/state").await;
    assert_eq!(state.status, StatusCode::OK);
    let s = &state.body;
    for (field, kind) in [
        ("version", "string"),
        ("git_tag", "string"),
        ("build_time", "number"),
        ("start_time", "number"),
        ("elected_time", "number"),
        ("id", "string"),
        ("pid", "string"),
        ("hostname", "string"),
        ("activated_slaves", "number"),
        ("deactivated_slaves", "number"),
        ("unreachable_slaves", "number"),
        ("cluster", "string"),
        ("leader", "string"),
        ("leader_info", "object"),
        ("flags", "object"),
        ("slaves", "array"),
        ("frameworks", "array"),
        ("completed_frameworks", "array"),
        ("orphan_tasks", "array"),
        ("unregistered_frameworks", "array"),
    ] {
        has(s, field, kind);
    }
    assert_eq!(s["cluster"], "prod-east");
    let port = c.url.rsplit(':').next().unwrap().trim_end_matches('/');
    assert_eq!(s["leader"], format!("master@127.0.0.1:{port}"));
    assert_eq!(s["pid"], s["leader"], "this master leads");
    let info = &s["leader_info"];
    for (field, kind) in [
        ("id", "string"),
        ("pid", "string"),
        ("port", "number"),
        ("hostname", "string"),
        ("ip", "number"),
        ("address", "object"),
        ("version", "string"),
    ] {
        has(info, field, kind);
    }
    assert_eq!(info["ip"], 16_777_343, "127.0.0.1 packed as MasterInfo.ip");
    assert_eq!(info["address"]["ip"], "127.0.0.1");

    let agents = s["slaves"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{s}");
    assert_eq!(s["activated_slaves"], 2.0);
    for agent in agents {
        for (field, kind) in [
            ("id", "string"),
            ("pid", "string"),
            ("hostname", "string"),
            ("port", "number"),
            ("registered_time", "number"),
            ("resources", "object"),
            ("used_resources", "object"),
            ("offered_resources", "object"),
            ("reserved_resources", "object"),
            ("unreserved_resources", "object"),
            ("attributes", "object"),
            ("active", "bool"),
            ("version", "string"),
            ("capabilities", "array"),
        ] {
            has(agent, field, kind);
        }
        for scalar in ["cpus", "mem", "disk", "gpus"] {
            has(&agent["resources"], scalar, "number");
        }
        assert_eq!(agent["resources"]["ports"], "[31000-32000]");
        assert!(agent["pid"].as_str().unwrap().starts_with("slave(1)@"));
    }
    let by_server = |id: &str| {
        agents
            .iter()
            .find(|x| x["id"].as_str().unwrap().starts_with(id))
            .unwrap_or_else(|| panic!("no agent for server {id}: {s}"))
            .clone()
    };
    let agent_a = by_server(&a);
    let agent_b = by_server(&b);
    // Flavor 2 (m1.small): 1 vCPU, 2048 MB, 20 GB.
    assert_eq!(agent_a["resources"]["cpus"], 1.0);
    assert_eq!(agent_a["resources"]["mem"], 2048.0);
    assert_eq!(agent_a["resources"]["disk"], 20.0 * 1024.0);
    let ip = agent_a["hostname"].as_str().unwrap();
    assert!(
        ip.parse::<std::net::Ipv4Addr>().is_ok(),
        "an agent is named by its fixed IP without mesos-hostname: {ip}"
    );
    assert_eq!(agent_a["pid"], format!("slave(1)@{ip}:5051"));
    assert_eq!(agent_b["hostname"], "localhost");
    assert_eq!(agent_b["attributes"]["rack"], "r1");
    assert_eq!(agent_b["attributes"]["slots"], 4.0);
    assert!(agent_b["attributes"]["zone"].is_string());

    // The legacy path answers the same document; a stopped server is a disconnected agent,
    // a deleted one is gone.
    c.post(
        &format!("/compute/v2.1/servers/{a}/action"),
        json!({"os-stop": null}),
    )
    .await;
    let legacy = c.get("/master/state.json").await;
    assert_eq!(legacy.status, StatusCode::OK);
    assert_eq!(legacy.body["activated_slaves"], 1.0);
    let stopped = legacy.body["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == agent_a["id"])
        .cloned()
        .unwrap();
    assert_eq!(stopped["active"], false);
    c.delete(&format!("/compute/v2.1/servers/{b}")).await;
    let after = c.get("/state.json").await;
    assert_eq!(after.body["slaves"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_master_without_cluster_flag_has_no_cluster_field() {
    let c = TestCloud::start().await;
    let s = c.get("/master/state").await;
    assert_eq!(s.status, StatusCode::OK);
    assert!(s.body.get("cluster").is_none(), "{}", s.body);
    assert_eq!(s.body["slaves"], json!([]));
}
