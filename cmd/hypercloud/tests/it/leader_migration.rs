//! Leader migration (KEP-2436) between the two controller managers, as processes of the built
//! binary against the real apiserver (pkg/testenv) and a real `hypercloud local-cloud serve`
//! (`--cloud-provider=local`): the service controller moves from the in-tree
//! controller-manager to the cloud-controller-manager without a gap and without two owners.
//!
//! Also, without a cluster: the start-up plan, and configuration errors as usage errors.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hypercloud_testenv::leases::LeaseRef;
use hypercloud_testenv::localcloud::{cli_json, state_dir, Serve};
use hypercloud_testenv::nodes;
use hypercloud_testenv::process::{personality as personality_command, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::Api;
use serde_json::Value;

use crate::BIN;
const KCM: &str = "kube-controller-manager";
const CCM: &str = "cloud-controller-manager";

/// The load-balancer calls in the `--trace-cloud-calls` file of a controller manager started
/// by [`Setup::spawn`] (beside its log).
fn lb_calls(p: &Proc) -> Vec<Value> {
    std::fs::read_to_string(p.log_path().with_extension("jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("trace line is JSON"))
        .filter(|r| {
            r["method"]
                .as_str()
                .is_some_and(|m| m.contains("load_balancer"))
        })
        .collect()
}

/// `method` calls for Service `ns/name` in `calls`.
fn calls_for<'a>(calls: &'a [Value], method: &str, service: &str) -> Vec<&'a Value> {
    calls
        .iter()
        .filter(|r| r["method"] == method && r["args"]["service"] == service)
        .collect()
}

struct Setup {
    env: hypercloud_testenv::TestEnv,
    tmp: tempfile::TempDir,
    cloud: Serve,
    cloud_conf: PathBuf,
    migration_lease: String,
    /// Service name → UID, for the in-tree load-balancer name (`a<uid>`).
    uids: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

impl Setup {
    fn ns(&self) -> &str {
        self.env.namespace()
    }

    /// A LeaderMigrationConfiguration assigning the service controller to `component`.
    fn migration_config(&self, component: &str) -> PathBuf {
        let path = self.tmp.path().join(format!("{component}-migration.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: {}\ncontrollerLeaders:\n  - name: service\n    component: {component}\n",
                self.migration_lease
            ),
        )
        .expect("write config");
        path
    }

    fn spawn(&self, personality: &str, lease: &str, controllers: &str, component: &str) -> Proc {
        let log = self.tmp.path().join(format!("{personality}.log"));
        let trace = log.with_extension("jsonl");
        let args = [
            "--cloud-provider=local".to_string(),
            format!("--cloud-config={}", self.cloud_conf.display()),
            format!(
                "--kubeconfig={}",
                self.env.control_plane().kubeconfig().display()
            ),
            format!("--leader-elect-resource-namespace={}", self.ns()),
            format!("--leader-elect-resource-name={lease}"),
            "--leader-elect-lease-duration=4s".into(),
            "--leader-elect-renew-deadline=3s".into(),
            "--leader-elect-retry-period=1s".into(),
            "--secure-port=0".into(),
            format!("--controllers={controllers}"),
            "--enable-leader-migration".into(),
            format!(
                "--leader-migration-config={}",
                self.migration_config(component).display()
            ),
            format!("--trace-cloud-calls={}", trace.display()),
        ];
        let mut cmd = personality_command(BIN, personality);
        cmd.args(&args);
        let stdout = Stdout::File(log.with_extension("out"));
        Proc::spawn_with(personality, cmd, log, stdout)
    }

    fn lease(&self, name: &str) -> LeaseRef {
        LeaseRef::new(self.env.client(), self.ns(), name)
    }

    async fn holder(&self, lease: &str) -> Option<String> {
        self.lease(lease).holder().await
    }

    /// Polls every 50ms until the holder of `lease` satisfies `pred`.
    async fn wait_holder(
        &self,
        lease: &str,
        limit: Duration,
        what: &str,
        pred: impl Fn(&Option<String>) -> bool,
    ) -> Option<String> {
        self.lease(lease)
            .wait_holder(what, limit, Duration::from_millis(50), pred)
            .await
            .0
    }

    /// Waits (30s each) until `lease` has a holder, then until the migration Lease has the
    /// same one: a controller manager whose configuration assigns it the service controller
    /// leads with one identity. That identity.
    async fn wait_leads_migration(&self, lease: &str, who: &str) -> Option<String> {
        let id = self
            .wait_holder(
                lease,
                Duration::from_secs(30),
                &format!("{who} main"),
                |h| h.is_some(),
            )
            .await;
        let migration = self.migration_lease.clone();
        self.wait_holder(
            &migration,
            Duration::from_secs(30),
            &format!("{who} migration"),
            |h| *h == id,
        )
        .await;
        id
    }

    /// The local cloud's load balancers named `name` (Octavia list by name).
    fn lbs_named(&self, name: &str) -> Vec<Value> {
        self.cloud.load_balancers_named(name)
    }

    /// The load balancers of Service `service` under either layout's name: the
    /// controller-manager (in-tree) names it `a<uid>`, the cloud-controller-manager
    /// `kube_service_<cluster>_<ns>_<name>` and adopts an in-tree one without renaming it.
    fn lbs_of(&self, service: &str) -> Vec<Value> {
        let mut found = self.lbs_named(&format!("kube_service_kubernetes_{}_{service}", self.ns()));
        let uid = self.uids.lock().expect("uids").get(service).cloned();
        if let Some(uid) = uid {
            let mut legacy: String = std::iter::once('a')
                .chain(uid.chars().filter(|c| *c != '-'))
                .collect();
            legacy.truncate(32);
            found.extend(self.lbs_named(&legacy));
        }
        found
    }

    async fn create_lb_service(&self, name: &str) {
        let api: Api<Service> = Api::namespaced(self.env.client(), self.ns());
        let svc = Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                selector: Some([("app".to_string(), name.to_string())].into()),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = api
            .create(&PostParams::default(), &svc)
            .await
            .expect("create service");
        if let Some(uid) = created.metadata.uid {
            self.uids.lock().expect("uids").insert(name.into(), uid);
        }
    }

    /// Waits until Service `name` has a load-balancer ingress and the cloud has its load
    /// balancer; returns the load balancer's id.
    async fn wait_lb(&self, name: &str) -> String {
        let api = &Api::<Service>::namespaced(self.env.client(), self.ns());
        let what = format!("a load balancer for {name}");
        eventually(&what, Duration::from_secs(60), move || async move {
            let svc = api.get(name).await.expect("get service");
            let ingress = svc
                .status
                .and_then(|s| s.load_balancer)
                .and_then(|l| l.ingress)
                .unwrap_or_default();
            let lbs = self.lbs_of(name);
            (!ingress.is_empty() && !lbs.is_empty())
                .then(|| lbs[0]["id"].as_str().expect("id").to_string())
        })
        .await
    }
}

async fn setup() -> Setup {
    let env = hypercloud_testenv::TestEnv::new("leader-migration")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().expect("tmp");
    let cloud = Serve::start(BIN, &state_dir(&tmp), &[]);
    let cloud_conf = tmp.path().join("cloud.conf");
    std::fs::write(&cloud_conf, cloud.cloud_conf()).expect("cloud.conf");
    let migration_lease = env.unique_name("migration");
    Setup {
        env,
        tmp,
        cloud,
        cloud_conf,
        migration_lease,
        uids: Default::default(),
    }
}

/// A service controller acts on every LoadBalancer Service of the cluster, so the two tests
/// that run one (each in its own namespace, on the one shared apiserver) take turns: otherwise
/// one test's cloud-controller-manager would ensure the other's Services.
static SERVICE_CONTROLLERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn service_controller_moves_from_controller_manager_to_ccm_exactly_once() {
    let _group = hypercloud_testenv::group("leader_migration").await;
    let _turn = SERVICE_CONTROLLERS.lock().await;
    let s = setup().await;
    let ns = s.ns().to_string();
    let (kcm_lease, ccm_lease) = (s.env.unique_name("kcm"), s.env.unique_name("ccm"));
    let mig = s.migration_lease.clone();

    // 1. The in-tree controller-manager, its config assigning `service` to itself: it takes
    //    its own Lease, then the migration Lease (same identity, as upstream), and runs the
    //    service controller under the latter.
    let mut kcm = s.spawn("controller-manager", &kcm_lease, "service", KCM);
    let kcm_id = s.wait_leads_migration(&kcm_lease, "kcm").await;
    s.create_lb_service("svc-a").await;
    let a_id = s.wait_lb("svc-a").await;
    let a_key = format!("{ns}/svc-a");
    assert!(
        !calls_for(&lb_calls(&kcm), "ensure_load_balancer", &a_key).is_empty(),
        "the controller-manager ensured A"
    );
    let kcm_out = kcm.stdout();
    assert!(
        kcm_out.contains("service-lb-controller            enabled, under the migration lease"),
        "{kcm_out}"
    );

    // 2. The cloud-controller-manager, its config assigning `service` to itself: it leads its
    //    own Lease and runs its main controllers (cloud-node initialises a Node of the local
    //    cloud), but waits for the migration Lease and does not touch Services meanwhile.
    let node = s.env.unique_name("lm-node");
    cli_json(
        BIN,
        &state_dir(&s.tmp),
        &["instance", "create", &node, "-o", "json"],
    );
    let ccm = s.spawn(
        "cloud-controller-manager",
        &ccm_lease,
        "cloud-node,service",
        CCM,
    );
    let ccm_id = s
        .wait_holder(&ccm_lease, Duration::from_secs(30), "ccm main", |h| {
            h.is_some()
        })
        .await;
    assert_ne!(ccm_id, kcm_id);
    let nodes: Api<Node> = Api::all(s.env.client());
    nodes::create_tainted(&nodes, &node).await;
    nodes::wait_for(
        &nodes,
        &node,
        &format!("cloud-node to initialise {node}"),
        Duration::from_secs(30),
        |n| nodes::provider_id(n).is_some(),
    )
    .await;
    // Several retry periods of contending: the migration Lease stays with the controller-
    // manager, and the cloud-controller-manager makes no load-balancer call at all.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(s.holder(&mig).await, kcm_id);
    assert!(lb_calls(&ccm).is_empty(), "{:?}", lb_calls(&ccm));
    let ccm_log = ccm.log();
    assert!(
        ccm_log.contains("attempting to acquire leader lease")
            && ccm_log.contains(&format!("{ns}/{mig}")),
        "{ccm_log}"
    );
    assert!(
        !ccm_log.contains("starting migrated controllers"),
        "{ccm_log}"
    );
    assert!(
        kcm.log().contains("starting migrated controllers"),
        "{}",
        kcm.log()
    );

    // 3. Hand-over: the controller-manager is stopped (SIGTERM: its service controller stops,
    //    then it releases the migration Lease). Service B is created at that moment, while
    //    nobody holds the Lease; the cloud-controller-manager takes over and reconciles it.
    let stopped = Instant::now();
    kcm.sigterm();
    let after = s
        .wait_holder(&mig, Duration::from_secs(10), "release", |h| *h != kcm_id)
        .await;
    s.create_lb_service("svc-b").await;
    let free_when_b_created = after.is_none();
    kcm.assert_exits(0, Duration::from_secs(10));
    let kcm_log = kcm.log();
    for lease in [&mig, &kcm_lease] {
        assert!(
            kcm_log
                .lines()
                .any(|l| l.contains("released lease") && l.contains(lease.as_str())),
            "{lease} not released:\n{kcm_log}"
        );
    }
    s.wait_holder(&mig, Duration::from_secs(10), "takeover", |h| *h == ccm_id)
        .await;
    let handover = stopped.elapsed();
    let b_id = s.wait_lb("svc-b").await;
    eprintln!(
        "leader migration hand-over: SIGTERM to migration lease held by the cloud-controller-manager in {handover:?}; Service B created while the lease was {}",
        if free_when_b_created { "free" } else { "already taken over" }
    );
    assert!(
        handover < Duration::from_secs(5),
        "hand-over took {handover:?} (released lease: at most ~2.2 retry periods)"
    );

    // Exactly once: one load balancer for B, ensured only by the cloud-controller-manager;
    // A still has its one load balancer, the same one.
    let b_lbs = s.lbs_of("svc-b");
    assert_eq!(b_lbs.len(), 1, "{b_lbs:?}");
    assert_eq!(b_lbs[0]["id"], b_id.as_str());
    let a_lbs = s.lbs_of("svc-a");
    assert_eq!(a_lbs.len(), 1, "{a_lbs:?}");
    assert_eq!(a_lbs[0]["id"], a_id.as_str(), "A was not re-created");
    // A was created in-tree (`a<uid>`), B by the cloud-controller-manager (OCCM's name).
    assert!(
        a_lbs[0]["name"].as_str().expect("name").starts_with('a'),
        "{a_lbs:?}"
    );
    assert!(
        b_lbs[0]["name"]
            .as_str()
            .expect("name")
            .starts_with("kube_service_"),
        "{b_lbs:?}"
    );
    let b_key = format!("{ns}/svc-b");
    let (kcm_calls, ccm_calls) = (lb_calls(&kcm), lb_calls(&ccm));
    assert!(
        calls_for(&kcm_calls, "ensure_load_balancer", &b_key).is_empty(),
        "{kcm_calls:?}"
    );
    assert!(!calls_for(&ccm_calls, "ensure_load_balancer", &b_key).is_empty());
    // No double owner: every load-balancer call of the cloud-controller-manager came after
    // the last one of the controller-manager.
    let last_kcm = kcm_calls
        .iter()
        .map(|r| r["ts_unix_ms"].as_u64().unwrap() + r["latency_ms"].as_f64().unwrap() as u64)
        .max()
        .expect("kcm made calls");
    let first_ccm = ccm_calls
        .iter()
        .map(|r| r["ts_unix_ms"].as_u64().unwrap())
        .min()
        .expect("ccm made calls");
    assert!(
        last_kcm <= first_ccm,
        "overlap: controller-manager's last LB call ended at {last_kcm}, cloud-controller-manager's first began at {first_ccm}"
    );
    // The holder changed from the controller-manager's identity to the cloud-controller-
    // manager's, each the identity of its own main Lease.
    assert_eq!(s.holder(&mig).await, ccm_id);
    assert!(ccm.log().contains("starting migrated controllers"));

    // 4. The new owner also deletes: removing both Services removes both load balancers.
    let services: Api<Service> = Api::namespaced(s.env.client(), &ns);
    for name in ["svc-a", "svc-b"] {
        services
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete service");
    }
    let (setup, svcs) = (&s, &services);
    eventually(
        "the services and their load balancers to be cleaned up",
        Duration::from_secs(60),
        move || async move {
            (setup.lbs_of("svc-a").is_empty()
                && setup.lbs_of("svc-b").is_empty()
                && svcs.get_opt("svc-a").await.unwrap().is_none()
                && svcs.get_opt("svc-b").await.unwrap().is_none())
            .then_some(())
        },
    )
    .await;

    // 5. SIGTERM releases both of the cloud-controller-manager's Leases.
    let mut ccm = ccm;
    ccm.sigterm();
    ccm.assert_exits(0, Duration::from_secs(10));
    assert_eq!(s.holder(&ccm_lease).await, None);
    assert_eq!(s.holder(&mig).await, None);
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
    s.env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn losing_the_migration_lease_stops_the_process_non_zero() {
    let _group = hypercloud_testenv::group("leader_migration").await;
    let _turn = SERVICE_CONTROLLERS.lock().await;
    let s = setup().await;
    let ccm_lease = s.env.unique_name("ccm");
    let mig = s.migration_lease.clone();
    let mut ccm = s.spawn("cloud-controller-manager", &ccm_lease, "service", CCM);
    s.wait_leads_migration(&ccm_lease, "ccm").await;
    // Someone else takes the migration Lease (as after a partition): renewals fail for the
    // renew deadline (3s), then the process must stop its controllers and exit 1.
    s.lease(&mig).take_over("intruder", 600).await;
    ccm.assert_exits(1, Duration::from_secs(15));
    let log = ccm.log();
    assert!(log.contains("migration leaderelection lost"), "{log}");
    assert_eq!(s.holder(&mig).await.as_deref(), Some("intruder"));
    s.env.cleanup().await.expect("cleanup");
}

fn run(args: &[&str]) -> (i32, String, String) {
    hypercloud_testenv::process::run(BIN, args)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    format!("--leader-migration-config={}", p.display())
}

/// An empty configuration of the fake provider in `dir`, as a `--cloud-config` flag.
fn fake_cloud_config(dir: &Path) -> String {
    let fake = dir.join("fake.yaml");
    std::fs::write(&fake, "instances: []\n").expect("write");
    format!("--cloud-config={}", fake.display())
}

/// `PERSONALITY --cloud-provider=fake FAKE --enable-leader-migration [CFG]
/// --kubeconfig=/nonexistent/kubeconfig`: prints the start-up plan, then stops at the
/// kubeconfig.
fn plan(personality: &str, fake: &str, cfg: Option<&str>) -> (i32, String, String) {
    let mut args = vec![
        personality,
        "--cloud-provider=fake",
        fake,
        "--enable-leader-migration",
    ];
    args.extend(cfg);
    args.push("--kubeconfig=/nonexistent/kubeconfig");
    run(&args)
}

#[test]
fn configuration_errors_are_usage_errors_naming_the_field() {
    let _group = hypercloud_testenv::group_blocking("leader_migration");
    let dir = tempfile::tempdir().expect("tmp");
    let fake = fake_cloud_config(dir.path());
    for personality in ["controller-manager", "cloud-controller-manager"] {
        let base = [
            personality,
            "--cloud-provider=fake",
            fake.as_str(),
            "--kubeconfig=/nonexistent/kubeconfig",
        ];
        // A configuration without --enable-leader-migration (KEP-2436: fatal, not ignored).
        let cfg = write(dir.path(), "ok.yaml", "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: m\n");
        let (code, _, err) = run(&[&base[..], &[cfg.as_str()]].concat());
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("--leader-migration-config: requires --enable-leader-migration=true"),
            "{err}"
        );
        for (text, field) in [
            ("apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\ncontrollerLeaders: [{name: service, component: '*'}]\n", "leaderName: Required value"),
            ("apiVersion: controllermanager.config.k8s.io/v1beta1\nkind: LeaderMigrationConfiguration\nleaderName: m\nresourceLock: endpoints\n", "resourceLock: Invalid value: \"endpoints\""),
            ("apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: m\ncontrollerLeaders: [{name: service}]\n", "controllerLeaders[0].component: Required value"),
            ("apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: m\nleaderNmae: x\n", "unknown field `leaderNmae`"),
            ("apiVersion: controllermanager.config.k8s.io/v9\nkind: LeaderMigrationConfiguration\n", "apiVersion: \"controllermanager.config.k8s.io/v9\" is not supported"),
        ] {
            let cfg = write(dir.path(), "bad.yaml", text);
            let (code, out, err) =
                run(&[&base[..], &["--enable-leader-migration", cfg.as_str()]].concat());
            assert_eq!(code, 2, "{personality}: {err}");
            assert!(err.contains("bad.yaml") && err.contains(field), "{personality}: {err}");
            // Checked before the provider starts: nothing is reported.
            assert!(!out.contains("capabilities"), "{out}");
        }
        let missing = format!(
            "--leader-migration-config={}",
            dir.path().join("missing.yaml").display()
        );
        let (code, _, err) =
            run(&[&base[..], &["--enable-leader-migration", missing.as_str()]].concat());
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("cannot read"), "{err}");
    }
}

#[test]
fn start_up_plan_shows_the_lease_of_each_controller() {
    let _group = hypercloud_testenv::group_blocking("leader_migration");
    let dir = tempfile::tempdir().expect("tmp");
    let fake = fake_cloud_config(dir.path());
    let cfg = write(
        dir.path(),
        "lm.yaml",
        "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: lm\ncontrollerLeaders:\n  - {name: service, component: cloud-controller-manager}\n  - {name: cloud-node-lifecycle, component: kube-controller-manager}\n",
    );
    let (code, out, err) = plan("cloud-controller-manager", &fake, Some(&cfg));
    assert_eq!(code, 2, "{err}");
    for line in [
        "  cloud-node-controller            enabled\n",
        "  service-lb-controller            enabled, under the migration lease lm\n",
        "  cloud-node-lifecycle-controller  not run here: leader migration assigns it to kube-controller-manager\n",
        "  under lease kube-system/cloud-controller-manager: cloud-node-controller, node-ipam-controller, node-route-controller\n",
        "  under lease kube-system/lm (only while holding it): service-lb-controller\n",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // The same file read by the controller-manager: service is not its to run; it runs
    // cloud-node-lifecycle under the migration Lease.
    let (code, out, _) = plan("controller-manager", &fake, Some(&cfg));
    assert_eq!(code, 2);
    assert!(
        out.contains("  service-lb-controller            not run here: leader migration assigns it to cloud-controller-manager\n"),
        "{out}"
    );
    assert!(
        out.contains("  under lease kube-system/lm (only while holding it): cloud-node-lifecycle-controller\n"),
        "{out}"
    );
    // Without a file: upstream's default configuration.
    let (_, out, _) = plan("cloud-controller-manager", &fake, None);
    assert!(
        out.contains("leader migration: enabled (configuration: default), migration lease kube-system/cloud-provider-extraction-migration"),
        "{out}"
    );
}

#[test]
fn deploy_examples_move_the_cloud_controllers_from_kcm_to_ccm() {
    let _group = hypercloud_testenv::group_blocking("leader_migration");
    let deploy = hypercloud_testenv::repo_root().join("deploy/components/leader-migration");
    let dir = tempfile::tempdir().expect("tmp");
    let fake = fake_cloud_config(dir.path());
    let migrated = "  under lease kube-system/cloud-provider-extraction-migration (only while holding it): cloud-node-lifecycle-controller, service-lb-controller, node-route-controller\n";
    for (personality, file, main) in [
        (
            "controller-manager",
            "kube-controller-manager.conf",
            // Node IPAM and the volume controllers are not in the configuration (nor in
            // upstream's default): they stay with the controller manager's own Lease.
            "  under lease kube-system/kube-controller-manager: node-ipam-controller, persistentvolume-binder-controller, persistentvolume-expander-controller, persistentvolume-attach-detach-controller\n",
        ),
        (
            "cloud-controller-manager",
            "cloud-controller-manager.conf",
            "  under lease kube-system/cloud-controller-manager: cloud-node-controller, node-ipam-controller\n",
        ),
    ] {
        let cfg = format!("--leader-migration-config={}", deploy.join(file).display());
        let (code, out, err) = plan(personality, &fake, Some(&cfg));
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("--kubeconfig: cannot load"),
            "{file} must be valid: {err}"
        );
        assert!(out.contains(migrated), "{file}:\n{out}");
        assert!(out.contains(main), "{file}:\n{out}");
    }
    // (deploy/components/leader-migration makes the ConfigMap from cloud-controller-manager.conf;
    // deploy_manifests.rs renders and dry-runs it.)
}
