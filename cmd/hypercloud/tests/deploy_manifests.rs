//! deploy/: every manifest is accepted by the real apiserver (server-side dry run, the same
//! check as `kubectl apply --dry-run=server`), the RBAC has no wildcards and covers what the
//! cloud-controller-manager does, and every flag the Deployment passes is one the binary has.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::api::DynamicObject;
use kube::discovery::{Discovery, Scope};
use kube::Api;
use serde::Deserialize as _;

const BIN: &str = env!("CARGO_BIN_EXE_hypercloud");

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Every YAML document under deploy/, with the file it came from.
fn manifests() -> Vec<(PathBuf, serde_yaml::Value)> {
    let mut files = Vec::new();
    let mut dirs = vec![deploy_dir()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read deploy dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read manifest");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = serde_yaml::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if !v.is_null() {
                docs.push((f.clone(), v));
            }
        }
    }
    docs
}

#[tokio::test]
async fn manifests_pass_a_server_side_dry_run() {
    let env = hypercloud_testenv::TestEnv::new("deploy-dry-run")
        .await
        .expect("testenv");
    let client = env.client();
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let docs = manifests();
    assert!(docs.len() >= 8, "found only {} documents", docs.len());
    let mut kinds = Vec::new();
    for (file, doc) in docs {
        let obj: DynamicObject = serde_yaml::from_value(doc).expect("object");
        let types = obj.types.clone().expect("apiVersion and kind");
        let (group, version) = match types.api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), types.api_version.clone()),
        };
        let gvk = kube::api::GroupVersionKind::gvk(&group, &version, &types.kind);
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("{}: unknown kind {gvk:?}", file.display()));
        let ns = match caps.scope {
            Scope::Namespaced => Some(
                obj.metadata
                    .namespace
                    .clone()
                    .expect("namespaced objects name their namespace"),
            ),
            Scope::Cluster => None,
        };
        let api: Api<DynamicObject> = match &ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let name = obj.metadata.name.clone().unwrap_or_default();
        // What `kubectl apply --dry-run=server` sends: dryRun=All and strict field validation,
        // so a misspelt field fails instead of being dropped with a warning.
        let url = format!(
            "{}?dryRun=All&fieldValidation=Strict",
            <DynamicObject as kube::Resource>::url_path(&ar, ns.as_deref())
        );
        let req = http::Request::post(url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&obj).expect("json"))
            .expect("request");
        client
            .request::<DynamicObject>(req)
            .await
            .unwrap_or_else(|e| panic!("{}: {} {name} rejected: {e}", file.display(), types.kind));
        // Nothing was stored.
        assert!(
            api.get_opt(&name).await.expect("get").is_none()
                || types.kind == "ServiceAccount" && name == "default",
            "{name} was created by a dry run"
        );
        kinds.push(types.kind);
    }
    for k in [
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in deploy/");
    }
    env.cleanup().await.expect("cleanup");
}

#[test]
fn rbac_is_least_privilege_and_covers_the_controllers() {
    let mut granted = Vec::new();
    for (file, doc) in manifests() {
        let kind = doc["kind"].as_str().unwrap_or_default();
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        for rule in doc["rules"].as_sequence().expect("rules") {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_sequence()
                    .map(|s| {
                        s.iter()
                            .map(|v| v.as_str().expect("string").to_string())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for field in ["apiGroups", "resources", "verbs", "nonResourceURLs"] {
                assert!(
                    !list(field).iter().any(|v| v == "*"),
                    "{}: wildcard in {field}",
                    file.display()
                );
            }
            for g in list("apiGroups") {
                for r in list("resources") {
                    for v in list("verbs") {
                        granted.push(format!("{g}/{r}/{v}"));
                    }
                }
            }
        }
    }
    for need in [
        "/nodes/list",
        "/nodes/watch",
        "/nodes/patch",
        "/nodes/delete",
        "/nodes/status/patch",
        "/services/list",
        "/services/watch",
        "/services/patch",
        "/services/status/patch",
        "events.k8s.io/events/create",
        "coordination.k8s.io/leases/create",
        "coordination.k8s.io/leases/get",
        "coordination.k8s.io/leases/update",
        "authentication.k8s.io/tokenreviews/create",
        "authorization.k8s.io/subjectaccessreviews/create",
        "/persistentvolumes/patch",
        "/serviceaccounts/token/create",
    ] {
        assert!(granted.iter().any(|g| g == need), "RBAC lacks {need}");
    }
}

/// `hypercloud <personality> --help`.
fn help(personality: &str) -> String {
    let out = Command::new(BIN)
        .args([personality, "--help"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{personality} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn deployment_flags_exist_in_the_binary() {
    let mut checked = 0;
    let mut personalities = Vec::new();
    for (_, doc) in manifests() {
        if doc["kind"].as_str() != Some("Deployment") {
            continue;
        }
        let containers = doc["spec"]["template"]["spec"]["containers"]
            .as_sequence()
            .expect("containers");
        for c in containers {
            let cmd = c["command"].as_sequence().expect("command");
            assert_eq!(cmd[0].as_str(), Some("/usr/local/bin/hypercloud"));
            let personality = cmd[1].as_str().expect("personality");
            personalities.push(personality.to_string());
            let help = help(personality);
            for arg in cmd.iter().skip(2) {
                let flag = arg
                    .as_str()
                    .expect("string")
                    .split('=')
                    .next()
                    .expect("flag");
                assert!(
                    help.contains(&format!("{flag} "))
                        || help.contains(&format!("{flag}="))
                        || help.contains(&format!(", {flag}")),
                    "{flag} is not a {personality} flag"
                );
                checked += 1;
            }
        }
    }
    personalities.sort();
    assert_eq!(
        personalities,
        ["apiserver-plugin", "cloud-controller-manager"]
    );
    assert!(checked > 15, "checked only {checked} flags");
}
