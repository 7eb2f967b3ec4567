//! Credentials stay out of everything a component writes or serves (#35): with a password only
//! this test knows, the cloud-controller-manager (the `local` provider against a real local
//! cloud, the real apiserver) initialises a Node at `--v=10`; the password is in none of its
//! log, its cloud-call trace, `/configz` or the Events; and a wrong password stops it with an
//! error that names where the password came from, not the password.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hypercloud_testenv::localcloud::{cli_json, local_cloud, state_dir, Serve};
use hypercloud_testenv::nodes::{self, create_tainted, has_taint, TAINT_UNINITIALIZED};
use hypercloud_testenv::process::{admin_token, free_port, personality, Proc, Stdout};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{DeleteParams, ListParams};
use kube::Api;

use crate::BIN;

/// A local cloud whose admin password only the test knows, with one instance (`node`), and a
/// test namespace on the real apiserver.
struct Fixture {
    env: TestEnv,
    tmp: tempfile::TempDir,
    state: std::path::PathBuf,
    /// Distinctive, so any copy of it is found.
    secret: String,
    serve: Serve,
    node: String,
    kubeconfig: String,
}

impl Fixture {
    async fn start(test: &str, tag: &str) -> Fixture {
        let env = TestEnv::new(test).await.expect("testenv");
        let tmp = tempfile::tempdir().unwrap();
        let state = state_dir(&tmp);
        let secret = format!("Pw-{}-{tag}", env.unique_name("s").replace('-', ""));
        let mut serve_cmd = local_cloud(BIN);
        serve_cmd.arg("--password").arg(&secret);
        let serve = Serve::start_command(serve_cmd, &state, &[]);
        let kubeconfig = env.control_plane().kubeconfig().display().to_string();
        let f = Fixture {
            node: env.unique_name("sec-node"),
            env,
            tmp,
            state,
            secret,
            serve,
            kubeconfig,
        };
        f.create_instance(&f.node);
        f
    }

    /// Creates instance `name`; its JSON.
    fn create_instance(&self, name: &str) -> serde_json::Value {
        cli_json(
            BIN,
            &self.state,
            &[
                "--password",
                &self.secret,
                "instance",
                "create",
                name,
                "--zone",
                "nova",
                "--flavor",
                "m1.small",
                "-o",
                "json",
            ],
        )
    }

    /// The cloud-controller-manager (cloud-node only) with `conf`, at `--v=10`, tracing to
    /// `trace`, serving on `port`; its log is `log` in the temporary directory.
    fn ccm(&self, conf: &std::path::Path, trace: &std::path::Path, port: u16, log: &str) -> Proc {
        let mut cmd = personality(BIN, "cloud-controller-manager");
        cmd.args([
            "--cloud-provider=local",
            &format!("--cloud-config={}", conf.display()),
            &format!("--kubeconfig={}", self.kubeconfig),
            "--leader-elect=false",
            "--controllers=cloud-node",
            &format!("--secure-port={port}"),
            "--bind-address=127.0.0.1",
            &format!("--trace-cloud-calls={}", trace.display()),
            "--v=10",
        ]);
        Proc::spawn_with(
            "cloud-controller-manager",
            cmd,
            self.tmp.path().join(log),
            Stdout::Log,
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_in_logs_traces_configz_or_events() {
    let _group = hypercloud_testenv::group("secrets_stay_secret").await;
    let f = Fixture::start("secrets", "zq").await;
    let (env, tmp, secret, serve, node) =
        (&f.env, &f.tmp, f.secret.as_str(), &f.serve, f.node.as_str());
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(
        &conf,
        format!("{}password = \"{secret}\"\n", serve.cloud_conf()),
    )
    .unwrap();
    let trace = tmp.path().join("trace.jsonl");
    let port = free_port();
    let ccm = |conf: &std::path::Path, log: &str| f.ccm(conf, &trace, port, log);
    let nodes: Api<Node> = Api::all(env.client());
    create_tainted(&nodes, node).await;
    let mut p = ccm(&conf, "ccm.log");
    nodes::wait_for(
        &nodes,
        node,
        "the Node to be initialised",
        Duration::from_secs(60),
        |n| !has_taint(n, TAINT_UNINITIALIZED),
    )
    .await;

    // /configz, as an admin sees it.
    let token = admin_token(env.control_plane().kubeconfig());
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let configz = http
        .get(format!("https://127.0.0.1:{port}/configz"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(configz.status().as_u16(), 200);
    let configz = configz.text().await.unwrap();
    let events: Api<Event> = Api::all(env.client());
    let events = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .unwrap();
    assert!(
        !events.items.is_empty(),
        "the controller recorded Events about {node}"
    );
    let events = serde_json::to_string(&events.items).unwrap();
    p.sigterm();
    p.wait_exit(Duration::from_secs(30));
    let log = p.log();
    // The log is a --v=10 log: the cloud's requests are in it.
    assert!(
        log.contains("authenticate with Keystone") && log.contains("TRACE"),
        "a --v=10 log, with the cloud's calls: {}",
        &log[..log.len().min(4000)]
    );
    let trace_text = std::fs::read_to_string(&trace).unwrap();
    assert!(trace_text.contains("instance_metadata"), "{trace_text}");
    for (what, text) in [
        ("the --v=10 log", &log),
        ("the cloud-call trace", &trace_text),
        ("/configz", &configz),
        ("the Events", &events),
    ] {
        assert!(!text.contains(secret), "the password is in {what}");
        // Nor the apiserver credential the component was given (the kubeconfig's token).
        assert!(
            !text.contains(&token),
            "the kubeconfig's token is in {what}"
        );
    }

    // A wrong password: the error names its source, not its value.
    let wrong_secret = format!("{secret}-wrong");
    let wrong = tmp.path().join("wrong.conf");
    std::fs::write(
        &wrong,
        format!("{}password = \"{wrong_secret}\"\n", serve.cloud_conf()),
    )
    .unwrap();
    let mut p = ccm(&wrong, "wrong.log");
    let code = p.wait_exit(Duration::from_secs(60));
    let log = p.log();
    assert_ne!(code, Some(0), "{log}");
    assert!(
        log.contains("401") || log.to_lowercase().contains("unauthorized"),
        "{log}"
    );
    assert!(
        !log.contains(&wrong_secret) && !log.contains(secret),
        "the password is in the error"
    );
    let _ = nodes.delete(node, &DeleteParams::default()).await;
}

/// The same with the password in a Kubernetes Secret (`[Global] secret-name`): the
/// cloud-controller-manager at `--v=10` initialises a Node with it, the password is in none of
/// its log, trace, `/configz` or `/readyz`, and `/readyz` fails its `cloud-credentials` check,
/// naming the Secret, once the Secret is deleted (the process keeps running on the
/// credentials it read). The in-tree kubelet-helper, which has no client of its own, reads the
/// same Secret with `[Global] kubeconfig-path`, registers its Node at `--v=10`, and its log and
/// trace hold no password either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_held_password_stays_secret_and_readyz_follows_the_secret() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{ObjectMeta, PostParams};

    let _group = hypercloud_testenv::group("secrets_stay_secret").await;
    let f = Fixture::start("secrets-from-secret", "sq").await;
    let (env, tmp, secret, serve, node) =
        (&f.env, &f.tmp, f.secret.as_str(), &f.serve, f.node.as_str());
    let kubeconfig = &f.kubeconfig;
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    let object = Secret {
        metadata: ObjectMeta {
            name: Some("os-creds".into()),
            ..ObjectMeta::default()
        },
        string_data: Some(
            [(
                "clouds.conf".to_owned(),
                format!("[Global]\npassword = \"{secret}\"\n"),
            )]
            .into(),
        ),
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(
        &conf,
        format!(
            "{}secret-name = os-creds\nsecret-namespace = {}\n",
            serve.cloud_conf(),
            env.namespace()
        ),
    )
    .unwrap();
    let trace = tmp.path().join("trace.jsonl");
    let port = free_port();
    let mut p = f.ccm(&conf, &trace, port, "ccm.log");
    let nodes: Api<Node> = Api::all(env.client());
    create_tainted(&nodes, node).await;
    nodes::wait_for(
        &nodes,
        node,
        "the Node to be initialised with the Secret's password",
        Duration::from_secs(60),
        |n| !has_taint(n, TAINT_UNINITIALIZED),
    )
    .await;
    let token = admin_token(env.control_plane().kubeconfig());
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let get = |path: &str| {
        http.get(format!("https://127.0.0.1:{port}{path}"))
            .bearer_auth(&token)
            .send()
    };
    let readyz = get("/readyz?verbose").await.unwrap();
    assert_eq!(readyz.status().as_u16(), 200);
    let ready_text = readyz.text().await.unwrap();
    assert!(
        ready_text.contains("[+]cloud-credentials ok"),
        "{ready_text}"
    );
    let configz = get("/configz").await.unwrap().text().await.unwrap();

    // Deleted: readiness fails naming the Secret; the process keeps running.
    secrets
        .delete("os-creds", &DeleteParams::default())
        .await
        .unwrap();
    let mut unready = String::new();
    for _ in 0..100 {
        let r = get("/readyz?verbose").await.unwrap();
        if r.status().as_u16() == 500 {
            unready = r.text().await.unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let want = format!(
        "[-]cloud-credentials failed: Secret {}/os-creds: not found (deleted)",
        env.namespace()
    );
    assert!(unready.contains(&want), "{unready}");
    assert!(p.running(), "the component exited: {}", p.log());

    p.sigterm();
    p.wait_exit(Duration::from_secs(30));

    // The node side (in-tree kubelet-helper, no Kubernetes client of its own) reads the same
    // Secret with [Global] kubeconfig-path and registers its Node from the cloud at --v=10.
    // (The Secret is back first: it was deleted above.)
    secrets
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let helper_node = env.unique_name("sec-kh");
    let created = f.create_instance(&helper_node);
    let helper_id = created["id"]
        .as_str()
        .or(created["server"]["id"].as_str())
        .unwrap()
        .to_owned();
    let node_conf = tmp.path().join("cloud-node.conf");
    std::fs::write(
        &node_conf,
        format!(
            "{}secret-name = os-creds\nsecret-namespace = {}\nkubeconfig-path = {kubeconfig}\n\
             [Metadata]\nsearch-order = metadataService\nmetadata-url = {}\ninstance-id = {helper_id}\n",
            serve.cloud_conf(),
            env.namespace(),
            serve.metadata_url
        ),
    )
    .unwrap();
    let helper_trace = tmp.path().join("kh-trace.jsonl");
    let out = personality(BIN, "kubelet-helper")
        .args([
            "--cloud-provider=local",
            &format!("--cloud-config={}", node_conf.display()),
            &format!("--kubeconfig={kubeconfig}"),
            &format!("--hostname-override={helper_node}"),
            &format!("--trace-cloud-calls={}", helper_trace.display()),
            "--once",
            "--v=10",
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let helper_log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{helper_log}");
    assert!(
        helper_log.contains("credentials read from the Secret"),
        "{helper_log}"
    );
    let registered = nodes.get(&helper_node).await.unwrap();
    assert!(
        registered
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .is_some_and(|id| id.starts_with("local:///")),
        "{registered:?}"
    );
    let helper_trace = std::fs::read_to_string(&helper_trace).unwrap();

    let log = p.log();
    assert!(
        log.contains("credentials read from the Secret") && log.contains("TRACE"),
        "{}",
        &log[..log.len().min(4000)]
    );
    let trace_text = std::fs::read_to_string(&trace).unwrap();
    for (what, text) in [
        ("the --v=10 log", &log),
        ("the cloud-call trace", &trace_text),
        ("/configz", &configz),
        ("/readyz", &unready),
        ("the kubelet-helper's --v=10 log", &helper_log),
        ("the kubelet-helper's trace", &helper_trace),
    ] {
        assert!(!text.contains(secret), "the password is in {what}");
    }
    let _ = nodes.delete(node, &DeleteParams::default()).await;
    let _ = nodes.delete(&helper_node, &DeleteParams::default()).await;
}
