//! The controller managers as processes against the real apiserver (pkg/testenv) with the
//! fake provider: leader election between two or three cloud-controller-managers (one acts;
//! kill -9 → takeover within the lease duration; SIGTERM → the Lease is released and the
//! standby takes over at once), and the admin server (`/healthz` open, `/metrics` needs a
//! token the apiserver accepts and authorises, and parses as Prometheus text).

use std::process::Command;
use std::time::{Duration, Instant};

use hypercloud_testenv::leases::LeaseRef;
use hypercloud_testenv::nodes;
use hypercloud_testenv::process::{
    admin_token, free_port, personality as personality_command, Proc, Stdout,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{ObjectMeta, PostParams};
use kube::Api;

use crate::BIN;

const FAKE_CONFIG: &str = "\
region: RegionOne
zone: nova
instances:
  - name: node-1
    instanceType: m1.small
    addresses: [{type: InternalIP, address: 10.0.0.11}]
";

/// A controller manager process (killed when dropped, its log printed when the test fails)
/// and the port of its admin server.
struct Cm {
    proc: Proc,
    port: u16,
}

impl std::ops::Deref for Cm {
    type Target = Proc;

    fn deref(&self) -> &Proc {
        &self.proc
    }
}

impl std::ops::DerefMut for Cm {
    fn deref_mut(&mut self) -> &mut Proc {
        &mut self.proc
    }
}

struct Setup {
    env: hypercloud_testenv::TestEnv,
    dir: tempfile::TempDir,
    lease: String,
    token: String,
}

async fn setup(name: &str) -> Setup {
    let env = hypercloud_testenv::TestEnv::new(name)
        .await
        .expect("testenv");
    let dir = tempfile::tempdir().expect("tmp");
    let lease = env.unique_name("ccm");
    // Two instances named after the lease, so this test's Nodes are its own; scoped to them,
    // so this test's controllers leave the Nodes of the tests running beside it alone (a
    // "not found" would make their lifecycle controller delete them).
    let config = format!(
        "scope: {lease}-\n{FAKE_CONFIG}  - {{name: {lease}-n1, instanceType: m1.large, addresses: [{{type: InternalIP, address: 10.0.1.1}}]}}\n  - {{name: {lease}-n2, instanceType: m1.large, addresses: [{{type: InternalIP, address: 10.0.1.2}}]}}\n"
    );
    std::fs::write(dir.path().join("fake.yaml"), config).expect("config");
    let token = admin_token(env.control_plane().kubeconfig());
    Setup {
        env,
        dir,
        lease,
        token,
    }
}

impl Setup {
    fn spawn(&self, personality: &str, tag: &str, extra: &[&str]) -> Cm {
        self.spawn_at(personality, tag, free_port(), extra)
    }

    /// As [`Setup::spawn`], with the admin server on `port`.
    fn spawn_at(&self, personality: &str, tag: &str, port: u16, extra: &[&str]) -> Cm {
        let log = self.dir.path().join(format!("{tag}.log"));
        let cloud_config = format!(
            "--cloud-config={}",
            self.dir.path().join("fake.yaml").display()
        );
        let mut args = vec![
            format!(
                "--kubeconfig={}",
                self.env.control_plane().kubeconfig().display()
            ),
            format!("--leader-elect-resource-namespace={}", self.env.namespace()),
            format!("--leader-elect-resource-name={}", self.lease),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
        ];
        // Short lease timings, so takeovers are quick; a test that needs the leader to keep
        // its lease on a loaded machine passes its own.
        if !extra
            .iter()
            .any(|a| a.starts_with("--leader-elect-lease-duration"))
        {
            args.extend([
                "--leader-elect-lease-duration=4s".into(),
                "--leader-elect-renew-deadline=3s".into(),
                "--leader-elect-retry-period=1s".into(),
            ]);
        }
        if !extra.iter().any(|a| a.starts_with("--cloud-provider")) {
            args.push("--cloud-provider=fake".into());
            args.push(cloud_config);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut cmd = personality_command(BIN, personality);
        cmd.args(&args);
        Cm {
            proc: Proc::spawn_with(&format!("{personality} {tag}"), cmd, log, Stdout::Null),
            port,
        }
    }

    fn lease(&self) -> LeaseRef {
        LeaseRef::new(self.env.client(), self.env.namespace(), &self.lease)
    }

    async fn holder(&self) -> Option<String> {
        self.lease().holder().await
    }

    /// Polls every 100ms until the holder satisfies `pred`; returns it and how long it took.
    async fn wait_holder(
        &self,
        limit: Duration,
        pred: impl Fn(&Option<String>) -> bool,
    ) -> (Option<String>, Duration) {
        self.lease()
            .wait_holder("lease holder", limit, Duration::from_millis(100), pred)
            .await
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client")
}

async fn get(p: &Cm, path: &str, token: Option<&str>) -> (u16, String) {
    let mut headers = Vec::new();
    if let Some(t) = token {
        headers.push(("authorization", format!("Bearer {t}")));
    }
    request(p, path, None, &headers).await
}

/// GET `path` with a client certificate (`identity`: PEM certificate and key) and headers,
/// retrying while the admin server is not up yet.
async fn request(
    p: &Cm,
    path: &str,
    identity: Option<&str>,
    headers: &[(&str, String)],
) -> (u16, String) {
    let url = format!("https://127.0.0.1:{}{path}", p.port);
    let deadline = Instant::now() + Duration::from_secs(20);
    let client = match identity {
        None => http(),
        Some(pem) => reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(10))
            .identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"))
            .build()
            .expect("http client"),
    };
    loop {
        let mut req = client.get(&url);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        match req.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                return (status, r.text().await.unwrap_or_default());
            }
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "{url} not served: {e}\nlog:\n{}",
                    p.log()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Checks the Prometheus text format line by line and returns the samples.
/// Runs client_golang's promlint (what `promtool check metrics` runs; built by
/// hack/promlint.sh) on Prometheus text: whether it found no problem, and what it printed.
fn promlint(text: &str) -> (bool, String) {
    use std::io::Write as _;
    let script = hypercloud_testenv::repo_root().join("hack/promlint.sh");
    let out = Command::new(script).output().expect("run hack/promlint.sh");
    assert!(
        out.status.success(),
        "hack/promlint.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = String::from_utf8(out.stdout).expect("utf8");
    let mut child = Command::new(bin.trim())
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start promlint");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write metrics");
    let out = child.wait_with_output().expect("promlint");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn promlint_finds_problems() {
    let _group = hypercloud_testenv::group_blocking("ccm_runtime");
    // The check above can fail: a counter without `_total` and a name with a unit prefix.
    let (ok, problems) =
        promlint("# HELP requests Requests.\n# TYPE requests counter\nrequests 1\n");
    assert!(!ok);
    assert!(
        problems.contains("counter metrics should have \"_total\" suffix"),
        "{problems}"
    );
}

fn parse_metrics(text: &str) -> Vec<(String, f64)> {
    let mut samples = Vec::new();
    let mut typed = std::collections::HashSet::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let name = it.next().expect("name");
            let kind = it.next().expect("kind");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            typed.insert(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment: {line}");
        let (series, value) = line.rsplit_once(' ').expect("sample has a value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let name = series.split('{').next().expect("name");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            }
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
            .unwrap_or(name);
        assert!(typed.contains(family), "sample before its # TYPE: {line}");
        samples.push((series.to_string(), value));
    }
    samples
}

fn sample(samples: &[(String, f64)], series: &str) -> Option<f64> {
    samples.iter().find(|(s, _)| s == series).map(|(_, v)| *v)
}

/// Cloud calls other than `initialize`: only a process whose controllers run makes them.
async fn cloud_calls(p: &Cm, s: &Setup) -> f64 {
    let (code, body) = get(p, "/metrics", Some(&s.token)).await;
    assert_eq!(code, 200, "{body}");
    parse_metrics(&body)
        .iter()
        .filter(|(k, _)| {
            k.starts_with("cloudprovider_api_request_duration_seconds_count{")
                && !k.contains("request=\"initialize\"")
        })
        .map(|(_, v)| v)
        .sum()
}

impl Setup {
    /// Creates a Node with the uninitialized taint, as a kubelet with
    /// `--cloud-provider=external` registers it.
    async fn tainted_node(&self, name: &str) {
        nodes::create_tainted(&Api::all(self.env.client()), name).await;
    }

    /// Waits until a cloud-node controller has initialised `name` (taint gone, providerID set).
    async fn wait_initialised(&self, name: &str) {
        nodes::wait_for(
            &Api::all(self.env.client()),
            name,
            &format!("{name} to be initialised"),
            Duration::from_secs(30),
            |n| !nodes::has_taint(n, nodes::TAINT_UNINITIALIZED) && nodes::provider_id(n).is_some(),
        )
        .await;
    }

    async fn delete_nodes(&self, names: &[String]) {
        let nodes: Api<Node> = Api::all(self.env.client());
        for n in names {
            let _ = nodes.delete(n, &Default::default()).await;
        }
    }
}

async fn master_status(p: &Cm, s: &Setup) -> f64 {
    let (code, body) = get(p, "/metrics", Some(&s.token)).await;
    assert_eq!(code, 200, "{body}");
    let samples = parse_metrics(&body);
    sample(
        &samples,
        &format!("leader_election_master_status{{name=\"{}\"}}", s.lease),
    )
    .unwrap_or_else(|| panic!("no master status in\n{body}"))
}

#[tokio::test]
async fn one_leader_kill9_takeover_and_sigterm_release() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    let s = setup("ccm-leader-election").await;
    // Registered before any controller starts, so each leader finds its Node in its first list.
    let n1 = format!("{}-n1", s.lease);
    s.tainted_node(&n1).await;
    let a = s.spawn("cloud-controller-manager", "a", &[]);
    let (first, _) = s
        .wait_holder(Duration::from_secs(30), |h| h.is_some())
        .await;
    let b = s.spawn("cloud-controller-manager", "b", &[]);
    let c = s.spawn("cloud-controller-manager", "c", &[]);
    // All three serve; exactly one leads, and only the leader started its controllers.
    let statuses = [
        master_status(&a, &s).await,
        master_status(&b, &s).await,
        master_status(&c, &s).await,
    ];
    assert_eq!(statuses, [1.0, 0.0, 0.0], "a got the lease first");
    // Only the leader's controllers act: it asks the cloud about the new Node, the standbys
    // never ask the cloud anything.
    s.wait_initialised(&n1).await;
    assert!(cloud_calls(&a, &s).await >= 1.0);
    assert_eq!(cloud_calls(&b, &s).await, 0.0, "{}", b.log());
    assert_eq!(cloud_calls(&c, &s).await, 0.0, "{}", c.log());
    assert!(a.log().contains("starting controllers"), "{}", a.log());
    for p in [&b, &c] {
        assert!(!p.log().contains("starting controllers"), "{}", p.log());
        assert!(p.log().contains("attempting to acquire leader lease"));
    }
    // The standbys stay standbys while the leader renews.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(s.holder().await, first);

    // kill -9: nobody releases; a standby takes over once the lease (4s) has expired as it
    // observed it, i.e. within lease duration + one jittered retry period (1s * 2.2).
    drop(a);
    let (second, took) = s
        .wait_holder(Duration::from_secs(15), |h| h.is_some() && *h != first)
        .await;
    assert!(
        took <= Duration::from_millis(4000 + 2200 + 2500),
        "takeover after kill -9 took {took:?}"
    );
    let (b_status, c_status) = (master_status(&b, &s).await, master_status(&c, &s).await);
    assert_eq!(b_status + c_status, 1.0, "exactly one new leader");
    let (mut leader, standby) = if b_status == 1.0 { (b, c) } else { (c, b) };
    assert!(leader.log().contains("starting controllers"));
    assert!(!standby.log().contains("starting controllers"));
    // The new leader's controllers act (node-lifecycle asks the cloud about n1 at once),
    // the standby's still do not.
    let deadline = Instant::now() + Duration::from_secs(20);
    while cloud_calls(&leader, &s).await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "new leader made no cloud call:\n{}",
            leader.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(cloud_calls(&standby, &s).await, 0.0, "{}", standby.log());

    // SIGTERM: the leader stops its controllers, releases the lease and exits 0; the standby
    // takes over at its next retry, long before the 4s lease would have expired.
    let start = Instant::now();
    leader.sigterm();
    leader.assert_exits(0, Duration::from_secs(10));
    assert!(leader.log().contains("released lease"), "{}", leader.log());
    let (third, _) = s
        .wait_holder(Duration::from_secs(10), |h| h.is_some() && *h != second)
        .await;
    let took = start.elapsed();
    assert!(
        took < Duration::from_millis(3500),
        "takeover after release took {took:?}"
    );
    assert_ne!(third, first);
    assert_eq!(master_status(&standby, &s).await, 1.0);
    s.delete_nodes(&[n1]).await;
    s.env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn admin_server_delegates_auth_to_the_apiserver() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    let s = setup("ccm-admin-server").await;
    let cert_dir = s.dir.path().join("certs");
    let p = s.spawn(
        "cloud-controller-manager",
        "admin",
        &[&format!("--cert-dir={}", cert_dir.display())],
    );
    // Always-allowed paths need no token.
    for path in ["/healthz", "/livez", "/readyz"] {
        let (code, body) = get(&p, path, None).await;
        assert_eq!((code, body.as_str()), (200, "ok"), "{path}");
    }
    let (code, body) = get(&p, "/healthz?verbose", None).await;
    assert_eq!(code, 200);
    assert!(body.contains("[+]leaderElection ok"), "{body}");
    assert!(cert_dir.join("cloud-controller-manager.crt").exists());
    // /metrics: no token → 401, unknown token → 401.
    assert_eq!(get(&p, "/metrics", None).await.0, 401);
    assert_eq!(get(&p, "/metrics", Some("not-a-token")).await.0, 401);
    // A real user without RBAC rights → 403.
    let sas: Api<ServiceAccount> = Api::namespaced(s.env.client(), s.env.namespace());
    sas.create(
        &PostParams::default(),
        &ServiceAccount {
            metadata: ObjectMeta {
                name: Some("nobody".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .expect("create sa");
    let tr = sas
        .create_token_request(
            "nobody",
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![],
                    expiration_seconds: Some(600),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("token request");
    let sa_token = tr.status.expect("token").token;
    let (code, body) = get(&p, "/metrics", Some(&sa_token)).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("cannot get path \"/metrics\""), "{body}");
    // The admin (system:masters) → 200, and the text parses.
    let (code, body) = get(&p, "/metrics", Some(&s.token)).await;
    assert_eq!(code, 200, "{body}");
    let samples = parse_metrics(&body);
    assert!(sample(&samples, "process_resident_memory_bytes").is_some_and(|v| v > 0.0));
    assert!(
        samples.iter().any(|(k, v)| k.starts_with(
            "cloudprovider_api_request_duration_seconds_count{provider=\"fake\",request=\"initialize\""
        ) && *v == 1.0),
        "{body}"
    );
    // `promtool check metrics`' linter finds nothing (hack/promlint.sh).
    let (ok, problems) = promlint(&body);
    assert!(ok, "promlint: {problems}\n{body}");
    // Shutdown: exits 0.
    let mut p = p;
    p.sigterm();
    p.assert_exits(0, Duration::from_secs(10));
    s.env.cleanup().await.expect("cleanup");
}

/// A certificate authority minted for a test.
struct TestCa(rcgen::CertifiedIssuer<'static, rcgen::KeyPair>);

impl TestCa {
    fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().expect("key");
        TestCa(rcgen::CertifiedIssuer::self_signed(params, key).expect("ca"))
    }

    /// A client certificate and its key, PEM, for `cn` in `org`.
    fn client(&self, cn: &str, org: Option<&str>) -> String {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        if let Some(o) = org {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, o);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.0).expect("sign");
        format!("{}{}", cert.pem(), key.serialize_pem())
    }
}

/// A ClusterRole allowing GET /metrics, bound to `user` and `group`; deleted on drop.
async fn metrics_reader(s: &Setup, user: &str, group: &str) -> String {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = s.env.unique_name("metrics-reader");
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }))
    .expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group},
        ],
    }))
    .expect("binding");
    Api::<ClusterRole>::all(s.env.client())
        .create(&PostParams::default(), &role)
        .await
        .expect("create role");
    Api::<ClusterRoleBinding>::all(s.env.client())
        .create(&PostParams::default(), &binding)
        .await
        .expect("create binding");
    name
}

async fn delete_metrics_reader(s: &Setup, name: &str) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let dp = kube::api::DeleteParams::default();
    let _ = Api::<ClusterRoleBinding>::all(s.env.client())
        .delete(name, &dp)
        .await;
    let _ = Api::<ClusterRole>::all(s.env.client())
        .delete(name, &dp)
        .await;
}

/// The admin kubeconfig's client certificate and key (signed by the apiserver's client CA,
/// in system:masters), PEM.
fn admin_certificate(kubeconfig: &std::path::Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    let config: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    let user = config["users"]
        .as_sequence()
        .expect("users")
        .iter()
        .map(|u| &u["user"])
        .find(|u| u["client-certificate-data"].is_string())
        .expect("a client-certificate user");
    let decode = |key: &str| -> String {
        let b64 = user[key].as_str().expect("base64");
        let bytes: k8s_openapi::ByteString =
            serde_json::from_value(serde_json::Value::String(b64.to_string())).expect("base64");
        String::from_utf8(bytes.0).expect("pem")
    };
    format!(
        "{}{}",
        decode("client-certificate-data"),
        decode("client-key-data")
    )
}

/// `--client-ca-file` and `--requestheader-*` (upstream DelegatingAuthenticationOptions) on
/// `/metrics`: a client certificate's CommonName and Organization, and a front proxy's
/// headers, are authorised by the real apiserver's SubjectAccessReview; certificates of an
/// unknown CA, or a proxy whose name is not allowed, get 401. Without the flags, the client CA
/// comes from the apiserver's `extension-apiserver-authentication` ConfigMap, unless
/// `--authentication-skip-lookup`.
#[tokio::test]
async fn admin_server_authenticates_client_certificates_and_request_headers() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    let s = setup("ccm-admin-x509").await;
    let user = s.env.unique_name("metrics-user");
    let group = s.env.unique_name("metrics-group");
    let nobody = s.env.unique_name("nobody");
    let reader = metrics_reader(&s, &user, &group).await;
    let (client_ca, proxy_ca, unknown_ca) = (
        TestCa::new("client-ca"),
        TestCa::new("front-proxy-ca"),
        TestCa::new("unknown-ca"),
    );
    let client_ca_file = s.dir.path().join("client-ca.crt");
    let proxy_ca_file = s.dir.path().join("front-proxy-ca.crt");
    std::fs::write(&client_ca_file, client_ca.0.pem()).expect("write");
    std::fs::write(&proxy_ca_file, proxy_ca.0.pem()).expect("write");
    let p = s.spawn(
        "cloud-controller-manager",
        "x509",
        &[
            &format!("--client-ca-file={}", client_ca_file.display()),
            &format!("--requestheader-client-ca-file={}", proxy_ca_file.display()),
            "--requestheader-allowed-names=front-proxy-client",
        ],
    );
    // Lookup from the cluster (no CA flags), and the same with the lookup skipped.
    let lookup = s.spawn("cloud-controller-manager", "lookup", &[]);
    let skip = s.spawn(
        "cloud-controller-manager",
        "skip",
        &["--authentication-skip-lookup"],
    );

    let path = "/metrics";
    // Client certificates: the CommonName is the user, the Organization a group.
    let (code, body) = request(&p, path, Some(&client_ca.client(&user, None)), &[]).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("process_resident_memory_bytes"), "{body}");
    let member = client_ca.client(&nobody, Some(&group));
    assert_eq!(request(&p, path, Some(&member), &[]).await.0, 200);
    let (code, body) = request(&p, path, Some(&client_ca.client(&nobody, None)), &[]).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(&format!("User \"{nobody}\" cannot get path \"/metrics\"")),
        "{body}"
    );
    let stranger = unknown_ca.client(&user, Some(&group));
    assert_eq!(request(&p, path, Some(&stranger), &[]).await.0, 401);
    // Bearer tokens still work beside them.
    assert_eq!(get(&p, path, Some(&s.token)).await.0, 200);

    // Request headers through the allowed front proxy.
    let proxy = proxy_ca.client("front-proxy-client", None);
    let as_user = |name: &str| vec![("x-remote-user", name.to_string())];
    assert_eq!(
        request(&p, path, Some(&proxy), &as_user(&user)).await.0,
        200
    );
    let (code, body) = request(&p, path, Some(&proxy), &as_user(&nobody)).await;
    assert_eq!(code, 403, "{body}");
    let mut in_group = as_user(&nobody);
    in_group.push(("x-remote-group", group.clone()));
    assert_eq!(request(&p, path, Some(&proxy), &in_group).await.0, 200);
    // A certificate of the proxy CA with a name not allowed may not assert users.
    let intruder = proxy_ca.client("intruder", None);
    assert_eq!(
        request(&p, path, Some(&intruder), &as_user(&user)).await.0,
        401
    );
    // A client-CA certificate's headers are not trusted: it is only its own user.
    let (code, body) = request(
        &p,
        path,
        Some(&client_ca.client(&nobody, None)),
        &as_user(&user),
    )
    .await;
    assert_eq!(code, 403, "{body}");

    // The apiserver's own client CA, from kube-system/extension-apiserver-authentication.
    let admin = admin_certificate(s.env.control_plane().kubeconfig());
    let (code, body) = request(&lookup, path, Some(&admin), &[]).await;
    assert_eq!(code, 200, "{body}\n{}", lookup.log());
    assert_eq!(request(&lookup, path, Some(&member), &[]).await.0, 401);
    assert_eq!(request(&skip, path, Some(&admin), &[]).await.0, 401);
    assert_eq!(get(&skip, path, Some(&s.token)).await.0, 200);

    for mut p in [p, lookup, skip] {
        p.sigterm();
        p.assert_exits(0, Duration::from_secs(10));
    }
    delete_metrics_reader(&s, &reader).await;
    s.env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn controller_manager_external_holds_its_lease_and_serves() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    let s = setup("kcm-external").await;
    let mut p = s.spawn("controller-manager", "kcm", &["--cloud-provider=external"]);
    s.wait_holder(Duration::from_secs(30), |h| h.is_some())
        .await;
    assert_eq!(master_status(&p, &s).await, 1.0);
    assert!(
        p.log().contains("running no cloud controllers"),
        "{}",
        p.log()
    );
    p.sigterm();
    p.assert_exits(0, Duration::from_secs(10));
    assert_eq!(s.holder().await, None, "released");
    s.env.cleanup().await.expect("cleanup");
}

/// `--permit-port-sharing`: two processes serve on one port; `--tls-min-version=VersionTLS13`
/// and `--tls-cipher-suites` reach the listener (a TLS 1.2-only client is refused).
#[tokio::test]
async fn tls_flags_reach_the_admin_server() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    let s = setup("ccm-admin-tls").await;
    let port = free_port();
    let flags = [
        "--permit-port-sharing",
        "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_AES_256_GCM_SHA384",
    ];
    let a = s.spawn_at("cloud-controller-manager", "tls-a", port, &flags);
    let (code, body) = get(&a, "/healthz", None).await;
    assert_eq!((code, body.as_str()), (200, "ok"));
    let mut b = s.spawn_at("cloud-controller-manager", "tls-b", port, &flags);
    // Both listen: the second does not fail to bind (it would exit 1 at once).
    b.wait_for_output("serving securely", Duration::from_secs(30));
    let tls12 = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let err = tls12
        .get(format!("https://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .expect_err("TLS 1.2 refused");
    assert!(err.is_connect() || err.is_request(), "{err:?}");
    for mut p in [a, b] {
        p.sigterm();
        p.assert_exits(0, Duration::from_secs(10));
    }
    s.env.cleanup().await.expect("cleanup");
}

/// TLS flag values rustls cannot honour are refused at start, naming the flag (exit 2).
#[test]
fn unusable_tls_flags_are_refused_by_name() {
    let _group = hypercloud_testenv::group_blocking("ccm_runtime");
    for (flag, expect) in [
        ("--tls-min-version=VersionTLS10", "--tls-min-version: VersionTLS10 is not supported: rustls implements TLS 1.2 and 1.3 only"),
        ("--tls-min-version=VersionTLS11", "--tls-min-version: VersionTLS11 is not supported"),
        ("--tls-min-version=TLS12", "--tls-min-version: unknown tls version"),
        ("--tls-cipher-suites=TLS_RSA_WITH_AES_128_CBC_SHA", "--tls-cipher-suites: cipher suite TLS_RSA_WITH_AES_128_CBC_SHA is not supported: rustls"),
        ("--tls-cipher-suites=TLS_FOO", "--tls-cipher-suites: cipher suite TLS_FOO not supported or doesn't exist"),
        ("--tls-sni-cert-key=only-one-file", "--tls-sni-cert-key \"only-one-file\": expected comma separated certificate and key file paths"),
    ] {
        let out = Command::new(BIN)
            .args(["cloud-controller-manager", "--cloud-provider=fake", flag])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(expect), "{flag}: {stderr}");
    }
}

#[test]
fn bad_kubeconfig_is_a_usage_error_after_the_report() {
    let _group = hypercloud_testenv::group_blocking("ccm_runtime");
    let out = Command::new(BIN)
        .args([
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--kubeconfig=/nonexistent/kubeconfig",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("controllers:"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--kubeconfig: cannot load /nonexistent/kubeconfig"),
        "{stderr}"
    );
}

#[tokio::test]
async fn lost_leadership_stops_the_process_non_zero() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    let s = setup("ccm-lost-lease").await;
    let mut p = s.spawn("cloud-controller-manager", "lost", &[]);
    s.wait_holder(Duration::from_secs(30), |h| h.is_some())
        .await;
    // Someone else takes the Lease over (as after a long partition): the leader's renewals
    // fail until the renew deadline (3s), then it must stop and exit non-zero.
    s.lease().take_over("intruder", 600).await;
    p.assert_exits(1, Duration::from_secs(15));
    assert!(p.log().contains("leaderelection lost"), "{}", p.log());
    assert_eq!(s.holder().await.as_deref(), Some("intruder"));
    s.env.cleanup().await.expect("cleanup");
}

/// A provider call that panics (the fake's `panicOn` fault hook) inside a controller worker:
/// the process must not stay up as a zombie with `/healthz` green. It exits 101 within a few
/// seconds, and from the moment the panic is logged `/healthz` never answers 200.
#[tokio::test]
async fn a_panicking_provider_call_ends_the_process_non_zero() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    let s = setup("ccm-panic").await;
    let path = s.dir.path().join("fake.yaml");
    let mut config = std::fs::read_to_string(&path).expect("config");
    config.push_str("panicOn: [instance_metadata]\n");
    std::fs::write(&path, config).expect("config");
    // Upstream's lease timings: under a loaded CI machine the 3 s renew deadline of the other
    // tests can expire before the Node arrives, and a lost lease ends the process with 1.
    let mut p = s.spawn(
        "cloud-controller-manager",
        "panic",
        &[
            "--leader-elect-lease-duration=15s",
            "--leader-elect-renew-deadline=10s",
            "--leader-elect-retry-period=2s",
        ],
    );
    let (code, body) = get(&p, "/healthz", None).await;
    assert_eq!(code, 200, "{body}");
    s.wait_holder(Duration::from_secs(30), |h| h.is_some())
        .await;

    let node = format!("{}-n1", s.lease);
    s.tainted_node(&node).await;
    let created = Instant::now();
    let url = format!("https://127.0.0.1:{}/healthz", p.port);
    let mut probes_after_panic = 0;
    while p.running() {
        // A hang guard, not a speed target: the panic comes within a second on a quiet machine.
        assert!(
            created.elapsed() < Duration::from_secs(60),
            "still running 60s after the Node that makes a provider call panic was created"
        );
        if p.log().contains("injected panic") {
            if let Ok(r) = http().get(&url).send().await {
                let status = r.status().as_u16();
                assert_ne!(status, 200, "/healthz answered 200 after a task panicked");
            }
            probes_after_panic += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.assert_exits(101, Duration::from_secs(1));
    let log = p.log();
    assert!(log.contains("a task panicked"), "{log}");
    assert!(log.contains("injected panic in instance_metadata"), "{log}");
    eprintln!("exited {:?} after the Node was created; {probes_after_panic} /healthz probes after the panic", created.elapsed());
    s.delete_nodes(&[node]).await;
    s.env.cleanup().await.expect("cleanup");
}

/// `--use-service-account-credentials=true` through the process: the cloud-node controller
/// initialises this test's Node as `kube-system/cloud-node-controller`, with only the RBAC of
/// deploy/components/service-account-credentials. A ValidatingAdmissionPolicy on that one
/// Node admits writes only from that ServiceAccount: the apiserver checks the identity.
#[tokio::test]
async fn service_account_credentials_reach_the_apiserver() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    use kube::api::{DeleteParams, Patch, PatchParams};
    use serde_json::json;

    let s = setup("ccm-sa-credentials").await;
    let client = s.env.client();
    // deploy/'s per-controller roles, applied as a user would.
    hypercloud_testenv::rbac::apply_file(
        &client,
        &hypercloud_testenv::repo_root()
            .join("deploy/components/service-account-credentials/controller-roles.yaml"),
    )
    .await;
    let node_name = format!("{}-n1", s.lease);
    let nodes_api: Api<Node> = Api::all(client.clone());
    // Excluded from lifecycle management: the other tests' controller managers (whose fake
    // clouds do not know it) leave it alone.
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": node_name, "labels": {"node.kubernetes.io/exclude-from-lifecycle-management": ""}},
        "spec": {"taints": [{"key": nodes::TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]},
    }))
    .expect("node");
    nodes_api
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");

    let policy_name = s.env.unique_name("node-writer");
    hypercloud_testenv::rbac::admit_only(
        &client,
        &policy_name,
        "nodes",
        &format!("object.metadata.name == '{node_name}'"),
        "system:serviceaccount:kube-system:cloud-node-controller",
    )
    .await;
    // In force once the admin's own write is refused.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let patch = json!({"metadata": {"labels": {"hypercloud.io/probe": "x"}}});
        match nodes_api
            .patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains("nodes written by") => break,
            _ => {
                assert!(Instant::now() < deadline, "policy not in force");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    let ccm = s.spawn(
        "cloud-controller-manager",
        "sa",
        // Only cloud-node: this process's lifecycle controller would delete the other
        // tests' Nodes, which its fake cloud does not know.
        &[
            "--use-service-account-credentials=true",
            "--controllers=cloud-node",
        ],
    );
    nodes::wait_for(
        &nodes_api,
        &node_name,
        "node initialised as cloud-node-controller",
        Duration::from_secs(60),
        |n| !nodes::has_taint(n, nodes::TAINT_UNINITIALIZED),
    )
    .await;
    drop(ccm);
    hypercloud_testenv::rbac::remove_policy(&client, &policy_name).await;
    let _ = nodes_api.delete(&node_name, &DeleteParams::default()).await;
    s.env.cleanup().await.expect("cleanup");
}

/// `/configz` of both personalities, as upstream's: the component configuration from the
/// flags under upstream's key, behind the same authentication and authorization as `/metrics`.
#[tokio::test]
async fn configz_serves_the_component_configuration() {
    let _group = hypercloud_testenv::group("ccm_runtime").await;
    let s = setup("cm-configz").await;
    for (personality, key, other, extra) in [
        (
            "cloud-controller-manager",
            "cloudcontrollermanager.config.k8s.io",
            "kubecontrollermanager.config.k8s.io",
            ["--concurrent-service-syncs=3", "--webhooks=*"],
        ),
        (
            "controller-manager",
            "kubecontrollermanager.config.k8s.io",
            "cloudcontrollermanager.config.k8s.io",
            ["--concurrent-service-syncs=3", "--cloud-provider=external"],
        ),
    ] {
        let mut p = s.spawn(personality, personality, &extra);
        assert_eq!(get(&p, "/configz", None).await.0, 401, "{personality}");
        assert_eq!(
            get(&p, "/configz", Some("not-a-token")).await.0,
            401,
            "{personality}"
        );
        let (code, body) = get(&p, "/configz", Some(&s.token)).await;
        assert_eq!(code, 200, "{personality}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert!(v.get(other).is_none(), "{personality}: {body}");
        let c = &v[key];
        assert_eq!(
            c["ServiceController"]["ConcurrentServiceSyncs"], 3,
            "{body}"
        );
        assert_eq!(c["Generic"]["MinResyncPeriod"], "12h0m0s", "{body}");
        assert_eq!(
            c["Generic"]["Controllers"],
            serde_json::json!(["*"]),
            "{body}"
        );
        assert_eq!(
            c["Generic"]["LeaderElection"]["ResourceName"],
            s.lease.as_str(),
            "{body}"
        );
        assert_eq!(
            c["Generic"]["LeaderElection"]["LeaseDuration"], "4s",
            "{body}"
        );
        if personality == "cloud-controller-manager" {
            assert_eq!(
                c["KubeCloudShared"]["CloudProvider"]["Name"], "fake",
                "{body}"
            );
            assert_eq!(c["Webhook"]["Webhooks"], serde_json::json!(["*"]), "{body}");
            assert_eq!(c["NodeStatusUpdateFrequency"], "5m0s", "{body}");
        } else {
            assert_eq!(
                c["KubeCloudShared"]["CloudProvider"]["Name"], "external",
                "{body}"
            );
            assert_eq!(c["NodeIPAMController"]["NodeCIDRMaskSize"], 0, "{body}");
        }
        p.sigterm();
        p.assert_exits(0, Duration::from_secs(10));
    }
    s.env.cleanup().await.expect("cleanup");
}
