//! deploy/: every kustomization (the bases, each provider overlay, the DaemonSet variant, the
//! apiserver-plugin, and each component on top of an overlay) renders with kubectl's built-in
//! kustomize and passes `kubectl apply --dry-run=server` against the real apiserver; the RBAC
//! has no wildcards and covers what the cloud-controller-manager does; every flag a container
//! passes is one its personality has, its provider is compiled in, its image is this version's.
//!
//! The Helm chart (deploy/helm/hypercloud) is held to the same: `helm template` for every cloud
//! and choice joins the kustomize renderings in [`rendered`], so the dry run and the RBAC, flag
//! and image checks cover it too; each rendering must equal its kustomize counterpart's objects
//! (Helm's own labels aside); `helm lint --strict` and `helm install --dry-run=server` run for
//! every cloud, and values.schema.json refuses bad values.
//!
//! kubectl is the one `hack/envtest.sh build-kubectl` builds (same version as the apiserver),
//! or `$HYPERCLOUD_KUBECTL`; helm the one `hack/helm.sh` builds, or `$HYPERCLOUD_HELM`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde::Deserialize as _;

use crate::BIN;
const IMAGE: &str = "ghcr.io/hypercloud/hypercloud";

fn repo() -> PathBuf {
    hypercloud_testenv::repo_root()
}

/// `$<var>`, else the path the build script prints on stdout (building the tool when missing).
fn kubectl() -> &'static Path {
    static KUBECTL: OnceLock<PathBuf> = OnceLock::new();
    KUBECTL.get_or_init(|| {
        hypercloud_testenv::tool("HYPERCLOUD_KUBECTL", &["hack/envtest.sh", "build-kubectl"])
    })
}

fn helm() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| hypercloud_testenv::tool("HYPERCLOUD_HELM", &["hack/helm.sh"]))
}

/// The clouds with an overlay in deploy/overlays and example values in the chart's ci/.
const CLOUDS: [&str; 8] = [
    "openstack",
    "local",
    "aws",
    "vsphere",
    "gce",
    "azure",
    "cloudstack",
    "rackspace",
];

/// A Helm rendering: its name (`helm/<name>` in [`rendered`]), the kustomization (under deploy/)
/// that must render the same objects, and the arguments of `helm template`/`install` after the
/// chart, relative to the copy of deploy/.
struct HelmCase {
    name: String,
    kustomization: String,
    args: Vec<String>,
}

fn helm_cases() -> Vec<HelmCase> {
    let cloud = |c: &str| {
        vec![
            "-f".to_string(),
            format!("helm/hypercloud/ci/{c}-values.yaml"),
            "--set-file".to_string(),
            format!("cloudConfig=overlays/{c}/cloud.conf"),
        ]
    };
    let mut cases: Vec<HelmCase> = CLOUDS
        .iter()
        .map(|c| HelmCase {
            name: c.to_string(),
            kustomization: format!("overlays/{c}"),
            args: cloud(c),
        })
        .collect();
    let mut ds = cloud("openstack");
    ds.extend(
        [
            "--set",
            "cloudControllerManager.kind=DaemonSet",
            "--set",
            "cloudControllerManager.leaderMigration.enabled=true",
            "--set",
            "cloudControllerManager.useServiceAccountCredentials=true",
            "--set",
            "cloudControllerManager.credentialsSecret=hypercloud-cloud-credentials",
        ]
        .map(String::from),
    );
    cases.push(HelmCase {
        name: "openstack-daemonset-components".into(),
        kustomization: "checks/openstack-daemonset-components".into(),
        args: ds,
    });
    cases.push(HelmCase {
        name: "apiserver-plugin".into(),
        kustomization: "apiserver-plugin".into(),
        args: [
            "--set",
            "cloudControllerManager.enabled=false",
            "--set",
            "apiserverPlugin.enabled=true",
            "--set",
            "existingCloudConfigSecret=hypercloud-cloud-config",
            "--set-file",
            "apiserverPlugin.tls.cert=apiserver-plugin/certs/tls.crt",
            "--set-file",
            "apiserverPlugin.tls.key=apiserver-plugin/certs/tls.key",
            "--set-file",
            "apiserverPlugin.tls.caCert=apiserver-plugin/certs/ca.crt",
        ]
        .map(String::from)
        .to_vec(),
    });
    cases
}

/// Runs helm in `deploy` (the copy of deploy/) with `args`; its output, or its failure's stderr.
fn run_helm(deploy: &Path, args: &[&str], rest: &[String]) -> Result<String, String> {
    let out = Command::new(helm())
        .current_dir(deploy)
        .args(args)
        .args(rest)
        .output()
        .expect("run helm");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).expect("utf-8"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

const HELM_TEMPLATE: [&str; 6] = [
    "template",
    "hypercloud",
    "helm/hypercloud",
    "--namespace",
    "kube-system",
    "--skip-tests",
];

fn parse_docs(yaml: &str) -> Vec<serde_yaml::Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| serde_yaml::Value::deserialize(d).expect("rendered yaml"))
        .filter(|v| !v.is_null())
        .collect()
}

/// One rendered kustomization: its directory (relative to deploy/) and its documents.
struct Rendered {
    name: String,
    yaml: String,
    docs: Vec<serde_yaml::Value>,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

fn kind_of(kustomization: &Path) -> String {
    let v: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(kustomization).expect("read")).expect("yaml");
    v["kind"].as_str().expect("kind").to_string()
}

/// Directories under `root` holding a kustomization.yaml of `kind`, relative, sorted.
fn kustomizations(root: &Path, kind: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let k = d.join("kustomization.yaml");
        if k.exists() && kind_of(&k) == kind {
            let rel = d.strip_prefix(root).expect("under root");
            found.push(rel.to_string_lossy().into_owned());
        }
        for e in std::fs::read_dir(&d).expect("read dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            }
        }
    }
    found.sort();
    found
}

/// Renders every kustomization of a copy of deploy/ (with a webhook certificate made by
/// hack/webhook-cert.sh, and a check overlay per component), once per test binary.
fn rendered() -> &'static [Rendered] {
    static RENDERED: OnceLock<Vec<Rendered>> = OnceLock::new();
    RENDERED.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("tmp");
        let deploy = tmp.path().join("deploy");
        copy_dir(&repo().join("deploy"), &deploy);
        let cert = Command::new(repo().join("hack/webhook-cert.sh"))
            .arg(deploy.join("apiserver-plugin/certs"))
            .output()
            .expect("run hack/webhook-cert.sh");
        assert!(cert.status.success(), "{}", String::from_utf8_lossy(&cert.stderr));
        // Each component over the openstack overlay, and all of them over the DaemonSet.
        let components = kustomizations(&deploy, "Component");
        assert!(components.len() >= 2, "components: {components:?}");
        let list = |cs: &[String]| {
            cs.iter()
                .map(|c| format!("- ../../{c}\n"))
                .collect::<String>()
        };
        for c in &components {
            let name = c.rsplit('/').next().expect("name");
            let dir = deploy.join("checks").join(name);
            std::fs::create_dir_all(&dir).expect("mkdir");
            let k = format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../overlays/openstack\ncomponents:\n{}",
                list(std::slice::from_ref(c))
            );
            std::fs::write(dir.join("kustomization.yaml"), k).expect("write");
        }
        let dir = deploy.join("checks/daemonset-all-components");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let k = format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../cloud-controller-manager-daemonset\ncomponents:\n{}",
            list(&components)
        );
        std::fs::write(dir.join("kustomization.yaml"), k).expect("write");
        // The openstack overlay as a DaemonSet with both components: the chart's counterpart.
        let dir = deploy.join("checks/openstack-daemonset-components");
        copy_dir(&deploy.join("overlays/openstack"), &dir);
        let overlay =
            std::fs::read_to_string(dir.join("kustomization.yaml")).expect("read overlay");
        let base = "\n- ../../cloud-controller-manager\n";
        assert!(overlay.contains(base), "overlays/openstack has no {base:?}");
        let k = format!(
            "{}components:\n{}",
            overlay.replace(base, "\n- ../../cloud-controller-manager-daemonset\n"),
            list(&components)
        );
        std::fs::write(dir.join("kustomization.yaml"), k).expect("write");

        let mut all = Vec::new();
        for name in kustomizations(&deploy, "Kustomization") {
            let out = Command::new(kubectl())
                .arg("kustomize")
                .arg(deploy.join(&name))
                .output()
                .expect("run kubectl kustomize");
            assert!(
                out.status.success(),
                "kubectl kustomize deploy/{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let yaml = String::from_utf8(out.stdout).expect("utf-8");
            let docs = parse_docs(&yaml);
            all.push(Rendered { name, yaml, docs });
        }
        for case in helm_cases() {
            let yaml = run_helm(&deploy, &HELM_TEMPLATE, &case.args)
                .unwrap_or_else(|e| panic!("helm template ({}): {e}", case.name));
            let docs = parse_docs(&yaml);
            all.push(Rendered {
                name: format!("helm/{}", case.name),
                yaml,
                docs,
            });
        }
        all
    })
}

fn rendered_named(name: &str) -> &'static Rendered {
    rendered()
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("deploy/{name} was not rendered"))
}

#[test]
fn every_overlay_and_base_renders() {
    let _group = hypercloud_testenv::group_blocking("deploy_manifests");
    let names: Vec<&str> = rendered().iter().map(|r| r.name.as_str()).collect();
    for want in [
        "apiserver-plugin",
        "cloud-controller-manager",
        "cloud-controller-manager-daemonset",
        "overlays/local",
        "overlays/openstack",
        "checks/leader-migration",
        "checks/service-account-credentials",
        "checks/credentials-secret",
        "checks/daemonset-all-components",
        "checks/openstack-daemonset-components",
        "overlays/aws",
        "overlays/vsphere",
        "overlays/gce",
        "overlays/azure",
        "cloud-node-manager",
        "helm/openstack",
        "helm/gce",
        "helm/apiserver-plugin",
    ] {
        assert!(names.contains(&want), "{want} not among {names:?}");
    }
    let kinds = |name: &str| -> Vec<String> {
        rendered_named(name)
            .docs
            .iter()
            .map(|d| d["kind"].as_str().expect("kind").to_string())
            .collect()
    };
    // The DaemonSet variant is a DaemonSet, not a second Deployment.
    let ds = kinds("cloud-controller-manager-daemonset");
    assert!(ds.iter().any(|k| k == "DaemonSet"), "{ds:?}");
    assert!(!ds.iter().any(|k| k == "Deployment"), "{ds:?}");
    // Azure's layout: the cloud-node-manager DaemonSet, and a cloud-controller-manager that
    // leaves the Nodes to it.
    let azure = rendered_named("overlays/azure");
    assert!(
        azure
            .docs
            .iter()
            .any(|d| d["kind"] == "DaemonSet" && d["metadata"]["name"] == "cloud-node-manager"),
        "overlays/azure: no cloud-node-manager DaemonSet"
    );
    let ccm_args = azure
        .docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "cloud-controller-manager")
        .map(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].clone())
        .expect("overlays/azure: the cloud-controller-manager");
    assert!(
        ccm_args
            .as_sequence()
            .expect("args")
            .iter()
            .any(|a| a == "--controllers=*,-cloud-node"),
        "overlays/azure: {ccm_args:?}"
    );
    // Each provider overlay ships its cloud-config Secret.
    for overlay in rendered()
        .iter()
        .filter(|r| r.name.starts_with("overlays/"))
    {
        assert!(
            overlay.docs.iter().any(|d| d["kind"] == "Secret"
                && d["metadata"]["name"] == "hypercloud-cloud-config"
                && d["data"]["cloud.conf"].is_string()),
            "{}: no hypercloud-cloud-config Secret with cloud.conf",
            overlay.name
        );
    }
    // The webhook certificate's CA went into every caBundle.
    let plugin = rendered_named("apiserver-plugin");
    let secret = plugin
        .docs
        .iter()
        .find(|d| d["kind"] == "Secret")
        .expect("TLS secret");
    let ca = secret["data"]["ca.crt"].as_str().expect("ca.crt");
    let mut bundles = 0;
    for d in &plugin.docs {
        if let Some(hooks) = d["webhooks"].as_sequence() {
            for h in hooks {
                assert_eq!(h["clientConfig"]["caBundle"].as_str(), Some(ca));
                bundles += 1;
            }
        }
    }
    assert_eq!(bundles, 3);
}

/// The objects of `file` the apiserver holds, as `kind/namespace/name` → resourceVersion.
fn stored(kubeconfig: &Path, file: &Path) -> std::collections::BTreeMap<String, String> {
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "--ignore-not-found", "-o", "json", "-f"])
        .arg(file)
        .output()
        .expect("run kubectl get");
    assert!(
        out.status.success(),
        "kubectl get -f {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut found = std::collections::BTreeMap::new();
    if out.stdout.iter().all(u8::is_ascii_whitespace) {
        return found;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("kubectl get json");
    let items = match v["kind"].as_str() {
        Some("List") => v["items"].as_array().cloned().unwrap_or_default(),
        _ => vec![v],
    };
    for o in items {
        let m = &o["metadata"];
        found.insert(
            format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                m["namespace"].as_str().unwrap_or_default(),
                m["name"].as_str().unwrap_or_default()
            ),
            m["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    found
}

#[tokio::test]
async fn every_rendering_passes_kubectl_apply_dry_run_server() {
    let _group = hypercloud_testenv::group("deploy_manifests").await;
    let env = hypercloud_testenv::TestEnv::new("deploy-dry-run")
        .await
        .expect("testenv");
    let kubeconfig = env.control_plane().kubeconfig().to_path_buf();
    let tmp = tempfile::tempdir().expect("tmp");
    for r in rendered() {
        let file = tmp
            .path()
            .join(format!("{}.yaml", r.name.replace('/', "_")));
        std::fs::write(&file, &r.yaml).expect("write");
        // Cluster-scoped objects of the shared apiserver may already exist (other tests apply
        // deploy/components/service-account-credentials for real): the dry run must leave
        // every object as it found it, none created and none changed.
        let before = stored(&kubeconfig, &file);
        // --validate=strict (kubectl's default, spelt out): a misspelt field fails instead of
        // being dropped with a warning.
        let out = Command::new(kubectl())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["apply", "--dry-run=server", "--validate=strict", "-f"])
            .arg(&file)
            .output()
            .expect("run kubectl apply");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "kubectl apply --dry-run=server deploy/{}: {}{stdout}",
            r.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let applied = stdout
            .lines()
            .filter(|l| l.ends_with("(server dry run)"))
            .count();
        assert_eq!(applied, r.docs.len(), "deploy/{}: {stdout}", r.name);
        assert_eq!(
            stored(&kubeconfig, &file),
            before,
            "deploy/{}: a dry run stored or changed objects",
            r.name
        );
    }
    env.cleanup().await.expect("cleanup");
}

#[test]
fn rbac_is_least_privilege_and_covers_the_controllers() {
    let _group = hypercloud_testenv::group_blocking("deploy_manifests");
    let mut granted = Vec::new();
    for r in rendered() {
        for doc in &r.docs {
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
                        "deploy/{}: wildcard in {field}",
                        r.name
                    );
                }
                for g in list("apiGroups") {
                    for res in list("resources") {
                        for v in list("verbs") {
                            granted.push(format!("{g}/{res}/{v}"));
                        }
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
    // Secrets: only by name (the credentials Secret), never every Secret.
    let creds = rendered_named("checks/credentials-secret");
    let secret_rules: Vec<&serde_yaml::Value> = rendered()
        .iter()
        .flat_map(|r| &r.docs)
        .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
        .flat_map(|d| d["rules"].as_sequence().into_iter().flatten())
        .filter(|rule| {
            rule["resources"]
                .as_sequence()
                .is_some_and(|rs| rs.iter().any(|r| r == "secrets"))
        })
        .collect();
    assert!(
        !secret_rules.is_empty(),
        "no rendering reads the credentials Secret"
    );
    for rule in secret_rules {
        assert_eq!(
            rule["resourceNames"],
            serde_yaml::from_str::<serde_yaml::Value>("[hypercloud-cloud-credentials]")
                .expect("yaml"),
            "a Secret rule without exactly the credentials Secret's name: {rule:?}"
        );
    }
    assert!(
        creds.docs.iter().any(|d| d["kind"] == "RoleBinding"
            && d["metadata"]["name"] == "system:cloud-controller-manager:cloud-credentials"
            && d["subjects"][0]["name"] == "cloud-controller-manager"),
        "checks/credentials-secret binds no Role to the cloud-controller-manager"
    );
    // With the service-account-credentials component, the per-controller identities that the
    // apiserver's bootstrap policy does not cover are bound (upstream's names).
    let sac = rendered_named("checks/service-account-credentials");
    for sa in ["cloud-node-controller", "pvl-controller"] {
        assert!(
            sac.docs.iter().any(|d| d["kind"] == "ClusterRoleBinding"
                && d["subjects"][0]["name"] == sa
                && d["subjects"][0]["namespace"] == "kube-system"),
            "no ClusterRoleBinding for kube-system/{sa}"
        );
    }
}

/// `hypercloud <personality> --help`.
fn help(personality: &str) -> String {
    let out = Command::new(BIN)
        .args(personality.split(' '))
        .arg("--help")
        .output()
        .expect("run");
    assert!(out.status.success(), "{personality} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn container_commands_are_personalities_with_their_flags() {
    let _group = hypercloud_testenv::group_blocking("deploy_manifests");
    let providers = String::from_utf8(
        Command::new(BIN)
            .arg("providers")
            .output()
            .expect("run")
            .stdout,
    )
    .expect("utf-8");
    let mut checked = 0;
    let mut personalities = Vec::new();
    for r in rendered() {
        for doc in &r.docs {
            if !matches!(doc["kind"].as_str(), Some("Deployment" | "DaemonSet")) {
                continue;
            }
            let containers = doc["spec"]["template"]["spec"]["containers"]
                .as_sequence()
                .expect("containers");
            for c in containers {
                assert_eq!(
                    c["image"].as_str(),
                    Some(format!("{IMAGE}:v{}", env!("CARGO_PKG_VERSION")).as_str()),
                    "deploy/{}: the image hack/image.sh builds",
                    r.name
                );
                let cmd = c["command"].as_sequence().expect("command");
                assert_eq!(cmd.len(), 1, "deploy/{}: command is the symlink", r.name);
                let personality = cmd[0]
                    .as_str()
                    .and_then(|c| c.strip_prefix("/usr/local/bin/"))
                    .expect("/usr/local/bin/<personality>");
                personalities.push(personality.to_string());
                let args = c["args"].as_sequence().expect("args");
                // A subcommand first (kubelet-helper cloud-node-manager): its own flags.
                let (help, args) = match args.first().and_then(|a| a.as_str()) {
                    Some(sub) if !sub.starts_with('-') => {
                        (help(&format!("{personality} {sub}")), &args[1..])
                    }
                    _ => (help(personality), &args[..]),
                };
                for arg in args {
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
                        "deploy/{}: {flag} is not a {personality} flag",
                        r.name
                    );
                    checked += 1;
                }
                // $(CLOUD_PROVIDER) in --cloud-provider: a provider of this binary.
                for e in c["env"].as_sequence().into_iter().flatten() {
                    if e["name"] == "CLOUD_PROVIDER" {
                        let p = e["value"].as_str().expect("value");
                        assert!(
                            providers
                                .lines()
                                .any(|l| l.split_whitespace().next() == Some(p)),
                            "deploy/{}: provider {p} is not compiled in:\n{providers}",
                            r.name
                        );
                    }
                }
            }
        }
    }
    personalities.sort();
    personalities.dedup();
    assert_eq!(
        personalities,
        [
            "apiserver-plugin",
            "cloud-controller-manager",
            "kubelet-helper"
        ]
    );
    assert!(checked > 50, "checked only {checked} flags");
}

/// `kind/namespace/name` → the document, with what only one of the tools adds taken out: Helm's
/// labels (`app.kubernetes.io/*`, `helm.sh/*`) and the chart's `checksum/*` pod annotations;
/// `renames` (kustomize's hashed generator names → the chart's plain ones) applied to every
/// string; base64 (Secret data, caBundles) without the line breaks kustomize wraps it with.
fn comparable(
    docs: &[serde_yaml::Value],
    renames: &[(String, String)],
) -> std::collections::BTreeMap<String, serde_yaml::Value> {
    fn rename(v: &mut serde_yaml::Value, renames: &[(String, String)]) {
        match v {
            serde_yaml::Value::String(s) => {
                if let Some((_, to)) = renames.iter().find(|(from, _)| from == s) {
                    *s = to.clone();
                }
            }
            serde_yaml::Value::Sequence(seq) => seq.iter_mut().for_each(|v| rename(v, renames)),
            serde_yaml::Value::Mapping(m) => m.values_mut().for_each(|v| rename(v, renames)),
            _ => {}
        }
    }
    fn strip(meta: &mut serde_yaml::Value, field: &str, prefixes: &[&str]) {
        let Some(m) = meta.as_mapping_mut() else {
            return;
        };
        if let Some(map) = m.get_mut(field).and_then(|v| v.as_mapping_mut()) {
            map.retain(|k, _| {
                let k = k.as_str().unwrap_or_default();
                !prefixes.iter().any(|p| k.starts_with(p))
            });
            if map.is_empty() {
                m.remove(field);
            }
        }
    }
    docs.iter()
        .map(|d| {
            let mut d = d.clone();
            rename(&mut d, renames);
            strip(
                &mut d["metadata"],
                "labels",
                &["app.kubernetes.io/", "helm.sh/"],
            );
            let unwrap = |v: &mut serde_yaml::Value| {
                if let Some(s) = v.as_str() {
                    *v = s.split_whitespace().collect::<String>().into();
                }
            };
            if d["kind"] == "Secret" {
                if let Some(data) = d.get_mut("data").and_then(|v| v.as_mapping_mut()) {
                    data.values_mut().for_each(unwrap);
                }
            }
            if let Some(hooks) = d.get_mut("webhooks").and_then(|h| h.as_sequence_mut()) {
                for h in hooks {
                    unwrap(&mut h["clientConfig"]["caBundle"]);
                }
            }
            if d["spec"]["template"].is_mapping() {
                strip(
                    &mut d["spec"]["template"]["metadata"],
                    "annotations",
                    &["checksum/"],
                );
            }
            let key = format!(
                "{}/{}/{}",
                d["kind"].as_str().unwrap_or_default(),
                d["metadata"]["namespace"].as_str().unwrap_or_default(),
                d["metadata"]["name"].as_str().unwrap_or_default()
            );
            (key, d)
        })
        .collect()
}

/// kustomize's generated ConfigMaps and Secrets carry a content hash (`<name>-<10 chars>`);
/// the chart's the plain name. The pairs (hashed, plain) where `chart` has the plain one.
fn generator_renames(
    kustomize: &[serde_yaml::Value],
    chart: &[serde_yaml::Value],
) -> Vec<(String, String)> {
    let names = |docs: &[serde_yaml::Value]| -> Vec<(String, String)> {
        docs.iter()
            .filter(|d| matches!(d["kind"].as_str(), Some("ConfigMap" | "Secret")))
            .map(|d| {
                (
                    d["kind"].as_str().unwrap_or_default().to_string(),
                    d["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect()
    };
    let plain = names(chart);
    names(kustomize)
        .into_iter()
        .filter_map(|(kind, name)| {
            let (base, hash) = name.rsplit_once('-')?;
            (hash.len() == 10 && plain.contains(&(kind, base.to_string())))
                .then(|| (name.clone(), base.to_string()))
        })
        .collect()
}

#[test]
fn helm_chart_renders_what_kustomize_renders() {
    let _group = hypercloud_testenv::group_blocking("deploy_manifests");
    let mut compared = 0;
    for case in helm_cases() {
        let chart = &rendered_named(&format!("helm/{}", case.name)).docs;
        let kustomize = &rendered_named(&case.kustomization).docs;
        let renames = generator_renames(kustomize, chart);
        let (chart, kustomize) = (comparable(chart, &[]), comparable(kustomize, &renames));
        let (ck, kk): (Vec<_>, Vec<_>) = (chart.keys().collect(), kustomize.keys().collect());
        assert_eq!(
            ck, kk,
            "helm/{} and deploy/{}: different objects",
            case.name, case.kustomization
        );
        for (key, doc) in &chart {
            assert!(
                doc == &kustomize[key],
                "helm/{} and deploy/{} differ in {key}:\n--- helm\n{}--- kustomize\n{}",
                case.name,
                case.kustomization,
                serde_yaml::to_string(doc).unwrap_or_default(),
                serde_yaml::to_string(&kustomize[key]).unwrap_or_default()
            );
            compared += 1;
        }
    }
    assert!(compared > 40, "compared only {compared} objects");
}

/// The chart's `version` and `appVersion` are the crate's (the one place the version is set;
/// the image tag follows appVersion, checked on every rendering above).
#[test]
fn the_chart_version_is_the_crate_version() {
    let chart: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo().join("deploy/helm/hypercloud/Chart.yaml")).expect("read"),
    )
    .expect("Chart.yaml");
    for key in ["version", "appVersion"] {
        assert_eq!(
            chart[key].as_str(),
            Some(env!("CARGO_PKG_VERSION")),
            "Chart.yaml {key}"
        );
    }
}

#[test]
fn helm_values_schema_and_checks_refuse_bad_values() {
    let _group = hypercloud_testenv::group_blocking("deploy_manifests");
    let deploy = repo().join("deploy");
    let conf = |c: &str| {
        vec![
            "--set-file".to_string(),
            format!("cloudConfig=overlays/{c}/cloud.conf"),
        ]
    };
    for (bad, names) in [
        ("cloudProvider=ibmcloud", "cloudProvider"),
        ("cloudControllerManager.replicas=0", "replicas"),
        ("cloudControllerManager.kind=StatefulSet", "kind"),
        (
            "apiserverPlugin.webhooks.cloudNode.failurePolicy=Sometimes",
            "failurePolicy",
        ),
        ("unknownKey=1", "unknownKey"),
        ("cloudNodeManager.enabled=true", "Azure's"),
        ("cloudNodeManager.waitRoutes=sometimes", "waitRoutes"),
    ] {
        let mut args = conf("openstack");
        args.extend(["--set".to_string(), bad.to_string()]);
        let Err(err) = run_helm(&deploy, &HELM_TEMPLATE, &args) else {
            panic!("helm template accepted --set {bad}");
        };
        assert!(
            err.contains(names),
            "--set {bad}: the error does not name {names}: {err}"
        );
    }
    // The cloud-node-manager with a cloud-controller-manager that would initialise the Nodes too.
    let mut args = conf("azure");
    args.extend(
        [
            "--set",
            "cloudProvider=azure",
            "--set",
            "cloudNodeManager.enabled=true",
        ]
        .map(String::from),
    );
    let err = run_helm(&deploy, &HELM_TEMPLATE, &args).expect_err("cloud-node left on");
    assert!(err.contains("-cloud-node"), "{err}");
    // No cloud config: the error says how to give one.
    let err = run_helm(&deploy, &HELM_TEMPLATE, &[]).expect_err("no cloudConfig accepted");
    assert!(err.contains("cloudConfig"), "{err}");
    // Another namespace than kube-system.
    let mut args = conf("aws");
    args.extend(["--namespace".to_string(), "default".to_string()]);
    let err = run_helm(&deploy, &HELM_TEMPLATE[..3], &args).expect_err("namespace default");
    assert!(err.contains("kube-system"), "{err}");

    // The toggles without a kustomize counterpart: the ServiceMonitor, a generated webhook
    // certificate (its CA in every caBundle), extra args.
    let mut args = conf("gce");
    args.extend(
        [
            "--set",
            "cloudControllerManager.serviceMonitor.enabled=true",
            "--set",
            "apiserverPlugin.enabled=true",
            "--set",
            "cloudControllerManager.extraArgs={--concurrent-service-syncs=2}",
        ]
        .map(String::from),
    );
    let docs = parse_docs(&run_helm(&deploy, &HELM_TEMPLATE, &args).expect("helm template"));
    let find = |kind: &str| {
        docs.iter()
            .filter(|d| d["kind"] == kind)
            .collect::<Vec<_>>()
    };
    assert_eq!(find("ServiceMonitor").len(), 1);
    let ca = find("Secret")
        .into_iter()
        .find(|d| d["type"] == "kubernetes.io/tls")
        .expect("generated TLS secret")["data"]["ca.crt"]
        .as_str()
        .expect("ca.crt")
        .to_string();
    let bundles: Vec<_> = docs
        .iter()
        .flat_map(|d| d["webhooks"].as_sequence().cloned().unwrap_or_default())
        .map(|h| h["clientConfig"]["caBundle"].as_str().map(String::from))
        .collect();
    assert_eq!(bundles, vec![Some(ca); 3]);
    let ccm = find("Deployment")
        .into_iter()
        .find(|d| d["metadata"]["name"] == "cloud-controller-manager")
        .expect("ccm");
    let args = &ccm["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_sequence()
            .expect("args")
            .iter()
            .any(|a| a == "--concurrent-service-syncs=2"),
        "{args:?}"
    );
}

#[tokio::test]
async fn helm_lint_and_install_dry_run_server_for_every_cloud() {
    let _group = hypercloud_testenv::group("deploy_manifests").await;
    let deploy = repo().join("deploy");
    let env = hypercloud_testenv::TestEnv::new("helm-dry-run")
        .await
        .expect("testenv");
    let kubeconfig = env
        .control_plane()
        .kubeconfig()
        .to_string_lossy()
        .into_owned();
    let mut cases: Vec<(String, Vec<String>)> = helm_cases()
        .into_iter()
        .filter(|c| c.name != "apiserver-plugin")
        .map(|c| (c.name, c.args))
        .collect();
    // The apiserver-plugin with the certificate the chart generates (no files needed).
    cases.push((
        "apiserver-plugin".into(),
        [
            "--set",
            "cloudControllerManager.enabled=false",
            "--set",
            "apiserverPlugin.enabled=true",
            "--set",
            "existingCloudConfigSecret=hypercloud-cloud-config",
        ]
        .map(String::from)
        .to_vec(),
    ));
    for (name, args) in &cases {
        let lint = run_helm(
            &deploy,
            &[
                "lint",
                "--strict",
                "helm/hypercloud",
                "--namespace",
                "kube-system",
            ],
            args,
        )
        .unwrap_or_else(|e| panic!("helm lint --strict ({name}): {e}"));
        assert!(
            lint.contains("0 chart(s) failed"),
            "helm lint ({name}): {lint}"
        );
        let mut install = args.clone();
        install.extend(["--kubeconfig".to_string(), kubeconfig.clone()]);
        let out = run_helm(
            &deploy,
            &[
                "install",
                "hypercloud",
                "helm/hypercloud",
                "--namespace",
                "kube-system",
                "--dry-run=server",
                // Other tests on this apiserver leave objects of the same names (upstream's
                // system:controller:* ClusterRoles, applied from the kustomize component):
                // what is checked is that the server takes the chart's objects, not who owns
                // them. A dry run changes nothing.
                "--take-ownership",
            ],
            &install,
        )
        .unwrap_or_else(|e| panic!("helm install --dry-run=server ({name}): {e}"));
        assert!(
            out.contains("STATUS: pending-install"),
            "helm install ({name}): {out}"
        );
    }
    env.cleanup().await.expect("cleanup");
}
