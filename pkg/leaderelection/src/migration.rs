//! Leader migration (KEP-2436): the `LeaderMigrationConfiguration` file and the filter that
//! says which controllers run under which Lease (upstream `k8s.io/controller-manager`
//! `pkg/leadermigration`: `config.ReadLeaderMigrationConfiguration`,
//! `ValidateLeaderMigrationConfiguration`, `DefaultLeaderMigrationConfiguration` and
//! `NewLeaderMigrator`'s `FilterFunc`).
//!
//! With migration enabled a controller manager runs each of its controllers in one of three
//! ways: controllers the configuration does not list run under the component's own Lease as
//! before ([`Placement::Main`]); listed controllers whose `component` is this component or
//! `*` run only while it also holds the migration Lease `leaderName`
//! ([`Placement::Migration`]); listed controllers assigned to another component do not run
//! here at all ([`Placement::Elsewhere`]). A rolling upgrade moves a controller from
//! kube-controller-manager to cloud-controller-manager by giving each side a configuration
//! that names itself: whoever holds the migration Lease runs it, so never both, and the
//! standby takes over as soon as the holder releases it.
//!
//! Decoding is strict as upstream's (`serializer.EnableStrict`): unknown and duplicate fields
//! are errors. `controllermanager.config.k8s.io/v1` has no `resourceLock` field (it always
//! locks with Leases); `v1beta1` and `v1alpha1`, which upstream still reads, have one, and it
//! must be `leases` here (upstream's `endpoints` lock no longer exists in client-go).

use std::path::Path;

use serde::Deserialize;

use crate::Error;

/// The API group of the configuration file.
pub const API_GROUP: &str = "controllermanager.config.k8s.io";
/// The versions read, newest first.
pub const API_VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha1"];
/// The `kind` of the configuration file.
pub const KIND: &str = "LeaderMigrationConfiguration";
/// The Lease of upstream's default configuration.
pub const DEFAULT_LEADER_NAME: &str = "cloud-provider-extraction-migration";
/// The only lock kind.
pub const RESOURCE_LOCK_LEASES: &str = "leases";
/// A `component` meaning "whichever component reads this configuration".
pub const ANY_COMPONENT: &str = "*";
/// The values `component` may take.
pub const COMPONENTS: &[&str] = &[
    "kube-controller-manager",
    "cloud-controller-manager",
    ANY_COMPONENT,
];

/// One controller's assignment.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerLeader {
    /// The controller (canonical name or alias).
    #[serde(default)]
    pub name: String,
    /// The component that runs it: `kube-controller-manager`, `cloud-controller-manager`, or
    /// `*` for whichever component reads the configuration.
    #[serde(default)]
    pub component: String,
}

/// The migration Lease and the controllers it protects (upstream's internal
/// `config.LeaderMigrationConfiguration`, whatever version it was read from).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderMigrationConfiguration {
    /// The migration Lease's name (in the component's `--leader-elect-resource-namespace`).
    pub leader_name: String,
    /// The lock kind; always `leases` once validated.
    pub resource_lock: String,
    /// Which component runs each migrated controller.
    pub controller_leaders: Vec<ControllerLeader>,
}

/// `apiVersion` and `kind`, read first to choose the schema.
#[derive(Deserialize)]
struct TypeMeta {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

/// `controllermanager.config.k8s.io/v1`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct V1 {
    #[serde(rename = "apiVersion")]
    _api_version: String,
    #[serde(rename = "kind")]
    _kind: String,
    #[serde(rename = "leaderName", default)]
    leader_name: String,
    #[serde(rename = "controllerLeaders", default)]
    controller_leaders: Vec<ControllerLeader>,
}

/// `v1beta1` and `v1alpha1`: v1 plus `resourceLock`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct V1beta1 {
    #[serde(rename = "apiVersion")]
    _api_version: String,
    #[serde(rename = "kind")]
    _kind: String,
    #[serde(rename = "leaderName", default)]
    leader_name: String,
    #[serde(rename = "resourceLock", default)]
    resource_lock: String,
    #[serde(rename = "controllerLeaders", default)]
    controller_leaders: Vec<ControllerLeader>,
}

impl Default for LeaderMigrationConfiguration {
    /// Upstream's `DefaultLeaderMigrationConfiguration`: route, service and
    /// cloud-node-lifecycle under `cloud-provider-extraction-migration`, each with
    /// component `*`, so whichever controller manager holds the Lease runs them.
    fn default() -> Self {
        let any = |name: &str| ControllerLeader {
            name: name.into(),
            component: ANY_COMPONENT.into(),
        };
        Self {
            leader_name: DEFAULT_LEADER_NAME.into(),
            resource_lock: RESOURCE_LOCK_LEASES.into(),
            controller_leaders: vec![
                any("route-controller"),
                any("service-controller"),
                any("cloud-node-lifecycle-controller"),
            ],
        }
    }
}

impl LeaderMigrationConfiguration {
    /// Reads, decodes and validates the file at `path`.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let text = hypercloud_cloudprovider::input::read_input_text(path).map_err(|source| {
            Error::ReadMigrationConfig {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let config = Self::decode(&text).map_err(|message| Error::DecodeMigrationConfig {
            path: path.to_path_buf(),
            message,
        })?;
        config
            .validate()
            .map_err(|errors| Error::InvalidMigrationConfig {
                path: path.to_path_buf(),
                errors,
            })?;
        Ok(config)
    }

    /// Decodes YAML (or JSON) text strictly; the result may still be invalid (see
    /// [`Self::validate`]). The error names the field at fault where there is one.
    pub fn decode(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Err(format!(
                "the file is empty; expected apiVersion {API_GROUP}/v1 and kind {KIND}"
            ));
        }
        hypercloud_cloudprovider::yaml::check_depth(text)?;
        let meta: TypeMeta =
            serde_yaml::from_str(text).map_err(|e| format!("not a {KIND}: {e}"))?;
        match meta.kind.as_deref() {
            Some(KIND) => {}
            Some(other) => return Err(format!("kind: {other:?} is not {KIND}")),
            None => return Err(format!("kind: Required value (expected {KIND})")),
        }
        let api_version = meta
            .api_version
            .ok_or_else(|| format!("apiVersion: Required value (expected {API_GROUP}/v1)"))?;
        let version = api_version
            .strip_prefix(API_GROUP)
            .and_then(|v| v.strip_prefix('/'))
            .filter(|v| API_VERSIONS.contains(v))
            .ok_or_else(|| {
                format!(
                    "apiVersion: {api_version:?} is not supported; use {}",
                    API_VERSIONS
                        .iter()
                        .map(|v| format!("{API_GROUP}/{v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        if version == "v1" {
            let v: V1 = serde_yaml::from_str(text).map_err(|e| {
                if e.to_string().contains("unknown field `resourceLock`") {
                    format!("resourceLock: not a field of {API_GROUP}/v1, which always locks with leases; remove it")
                } else {
                    e.to_string()
                }
            })?;
            Ok(Self {
                leader_name: v.leader_name,
                resource_lock: RESOURCE_LOCK_LEASES.into(),
                controller_leaders: v.controller_leaders,
            })
        } else {
            let v: V1beta1 = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
            Ok(Self {
                leader_name: v.leader_name,
                resource_lock: v.resource_lock,
                controller_leaders: v.controller_leaders,
            })
        }
    }

    /// Upstream's `ValidateLeaderMigrationConfiguration`, with `resourceLock` limited to
    /// `leases`: every problem, as `field.path: what`.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        if self.leader_name.is_empty() {
            errors.push(
                "leaderName: Required value: leaderName must be set for LeaderMigrationConfiguration"
                    .to_string(),
            );
        } else if let Err(why) =
            hypercloud_cloudprovider::names::dns1123_subdomain(&self.leader_name)
        {
            errors.push(format!(
                "leaderName: Invalid value: {:?}: {why}",
                self.leader_name
            ));
        }
        if self.resource_lock != RESOURCE_LOCK_LEASES {
            errors.push(format!(
                "resourceLock: Invalid value: {:?}: resource lock must be {RESOURCE_LOCK_LEASES:?}",
                self.resource_lock
            ));
        }
        for (i, leader) in self.controller_leaders.iter().enumerate() {
            if leader.component.is_empty() {
                errors.push(format!("controllerLeaders[{i}].component: Required value"));
            } else if !COMPONENTS.contains(&leader.component.as_str()) {
                errors.push(format!(
                    "controllerLeaders[{i}].component: Unsupported value: {:?}: supported values: {}",
                    leader.component,
                    COMPONENTS.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>().join(", ")
                ));
            }
            if leader.name.is_empty() {
                errors.push(format!("controllerLeaders[{i}].name: Required value"));
            } else if self.controller_leaders[..i]
                .iter()
                .any(|l| l.name == leader.name)
            {
                errors.push(format!(
                    "controllerLeaders[{i}].name: Duplicate value: {:?}",
                    leader.name
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// Under which Lease a controller runs (upstream `FilterResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Not part of the migration: runs under the component's own Lease
    /// (`ControllerNonMigrated`).
    Main,
    /// Migrated to this component: runs only while it holds the migration Lease
    /// (`ControllerMigrated`).
    Migration,
    /// Migrated to the named component: not run here (`ControllerUnowned`).
    Elsewhere(String),
}

/// Places controllers for one component (upstream `NewLeaderMigrator`).
#[derive(Clone, Debug)]
pub struct Migrator {
    config: LeaderMigrationConfiguration,
    component: String,
}

/// A component's controllers split by Lease, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Run under the component's own Lease.
    pub main: Vec<&'static str>,
    /// Run only while holding the migration Lease.
    pub migration: Vec<&'static str>,
    /// Not run here, with the component the configuration names for each.
    pub elsewhere: Vec<(&'static str, String)>,
    /// Configuration entries that name none of the given controllers (kept, as upstream,
    /// but reported: a misspelt name silently leaves a controller under the main Lease).
    pub unmatched: Vec<String>,
}

impl Migrator {
    /// The filter for `component` (`kube-controller-manager` or `cloud-controller-manager`).
    pub fn new(config: LeaderMigrationConfiguration, component: &str) -> Self {
        Self {
            config,
            component: component.into(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderMigrationConfiguration {
        &self.config
    }

    /// Where the controller known by `names` (canonical name first, then its aliases) runs.
    /// An entry matches when its `name` is any of them; when several match, the last wins,
    /// as upstream's map does.
    pub fn place(&self, names: &[&str]) -> Placement {
        match self
            .config
            .controller_leaders
            .iter()
            .rev()
            .find(|l| names.contains(&l.name.as_str()))
        {
            None => Placement::Main,
            Some(l) if l.component == ANY_COMPONENT || l.component == self.component => {
                Placement::Migration
            }
            Some(l) => Placement::Elsewhere(l.component.clone()),
        }
    }

    /// Splits `controllers`, each given as (canonical name, aliases).
    pub fn split(&self, controllers: &[(&'static str, &[&str])]) -> Split {
        let mut split = Split::default();
        for (name, aliases) in controllers {
            let mut names = vec![*name];
            names.extend_from_slice(aliases);
            match self.place(&names) {
                Placement::Main => split.main.push(name),
                Placement::Migration => split.migration.push(name),
                Placement::Elsewhere(c) => split.elsewhere.push((name, c)),
            }
        }
        for l in &self.config.controller_leaders {
            let matched = controllers
                .iter()
                .any(|(n, a)| *n == l.name || a.contains(&l.name.as_str()));
            if !matched && !split.unmatched.contains(&l.name) {
                split.unmatched.push(l.name.clone());
            }
        }
        split
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &str) -> Result<LeaderMigrationConfiguration, String> {
        LeaderMigrationConfiguration::decode(text)
    }

    #[test]
    fn default_is_upstreams() {
        let d = LeaderMigrationConfiguration::default();
        assert_eq!(d.leader_name, "cloud-provider-extraction-migration");
        assert_eq!(d.resource_lock, "leases");
        let names: Vec<_> = d
            .controller_leaders
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "route-controller",
                "service-controller",
                "cloud-node-lifecycle-controller"
            ]
        );
        assert!(d.controller_leaders.iter().all(|l| l.component == "*"));
        d.validate().expect("default is valid");
    }

    #[test]
    fn v1_has_no_resource_lock_and_implies_leases() {
        let c = decode(
            "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: m\ncontrollerLeaders:\n  - name: service\n    component: kube-controller-manager\n  - {name: route, component: '*'}\n",
        )
        .expect("v1");
        assert_eq!(
            c,
            LeaderMigrationConfiguration {
                leader_name: "m".into(),
                resource_lock: "leases".into(),
                controller_leaders: vec![
                    ControllerLeader {
                        name: "service".into(),
                        component: "kube-controller-manager".into()
                    },
                    ControllerLeader {
                        name: "route".into(),
                        component: "*".into()
                    },
                ],
            }
        );
        let err = decode(
            "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: m\nresourceLock: leases\ncontrollerLeaders: []\n",
        )
        .expect_err("strict v1");
        assert!(err.starts_with("resourceLock: not a field"), "{err}");
    }

    #[test]
    fn older_versions_carry_resource_lock() {
        for v in ["v1beta1", "v1alpha1"] {
            let c = decode(&format!(
                "apiVersion: controllermanager.config.k8s.io/{v}\nkind: LeaderMigrationConfiguration\nleaderName: migration-120-to-121\nresourceLock: leases\ncontrollerLeaders: []\n"
            ))
            .expect(v);
            assert_eq!(c.leader_name, "migration-120-to-121");
            assert_eq!(c.resource_lock, "leases");
            assert!(c.controller_leaders.is_empty());
            c.validate().expect("valid");
            // The endpoints lock decodes (as upstream) but is no longer valid.
            let c = decode(&format!(
                "apiVersion: controllermanager.config.k8s.io/{v}\nkind: LeaderMigrationConfiguration\nleaderName: m\nresourceLock: endpoints\n"
            ))
            .expect(v);
            let errs = c.validate().expect_err("endpoints");
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert!(errs[0].starts_with("resourceLock: Invalid value: \"endpoints\""));
            // Missing resourceLock in these versions is invalid too (no defaulting upstream).
            let c = decode(&format!(
                "apiVersion: controllermanager.config.k8s.io/{v}\nkind: LeaderMigrationConfiguration\nleaderName: m\n"
            ))
            .expect(v);
            assert!(c.validate().expect_err("no lock")[0].starts_with("resourceLock:"));
        }
    }

    #[test]
    fn strict_decoding_names_the_field() {
        let base = "apiVersion: controllermanager.config.k8s.io/v1beta1\nkind: LeaderMigrationConfiguration\nleaderName: m\nresourceLock: leases\n";
        let err = decode(&format!("{base}foo: bar\n")).expect_err("unknown");
        assert!(err.contains("unknown field `foo`"), "{err}");
        let err = decode(&format!("{base}resourceLock: endpoints1\n")).expect_err("duplicate");
        assert!(err.contains("resourceLock"), "{err}");
        let err = decode(&format!(
            "{base}controllerLeaders:\n  - name: route\n    component: '*'\n    extra: 1\n"
        ))
        .expect_err("unknown nested");
        assert!(err.contains("unknown field `extra`"), "{err}");
        let err = decode(&format!("{base}controllerLeaders: route\n")).expect_err("type");
        assert!(err.contains("controllerLeaders"), "{err}");
    }

    #[test]
    fn wrong_or_missing_type_is_an_error() {
        assert!(decode("").expect_err("empty").contains("empty"));
        assert!(decode("   \n").is_err());
        let err = decode("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
            .expect_err("kind");
        assert!(err.starts_with("kind:"), "{err}");
        let err = decode("kind: LeaderMigrationConfiguration\nleaderName: m\n").expect_err("api");
        assert!(err.starts_with("apiVersion: Required"), "{err}");
        let err = decode(
            "apiVersion: controllermanager.config.k8s.io/v2\nkind: LeaderMigrationConfiguration\n",
        )
        .expect_err("version");
        assert!(
            err.starts_with("apiVersion: \"controllermanager.config.k8s.io/v2\" is not supported"),
            "{err}"
        );
        assert!(decode("leaderName: m\n")
            .expect_err("no kind")
            .starts_with("kind:"));
        assert!(decode("- a\n- b\n").is_err());
    }

    #[test]
    fn validation_lists_every_problem_by_field() {
        let c = LeaderMigrationConfiguration {
            leader_name: String::new(),
            resource_lock: "configmaps".into(),
            controller_leaders: vec![
                ControllerLeader {
                    name: "route".into(),
                    component: "*".into(),
                },
                ControllerLeader {
                    name: String::new(),
                    component: String::new(),
                },
            ],
        };
        let errs = c.validate().expect_err("invalid");
        assert_eq!(
            errs,
            [
                "leaderName: Required value: leaderName must be set for LeaderMigrationConfiguration",
                "resourceLock: Invalid value: \"configmaps\": resource lock must be \"leases\"",
                "controllerLeaders[1].component: Required value",
                "controllerLeaders[1].name: Required value",
            ]
        );
        // An empty list is valid (nothing migrates).
        let c = LeaderMigrationConfiguration {
            controller_leaders: vec![],
            ..Default::default()
        };
        c.validate().expect("valid");
    }

    #[test]
    fn read_names_the_file_and_the_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let missing = dir.path().join("missing.yaml");
        let err = LeaderMigrationConfiguration::read(&missing).expect_err("missing");
        assert!(matches!(err, Error::ReadMigrationConfig { .. }));
        assert!(err
            .to_string()
            .starts_with("--leader-migration-config: cannot read"));
        let bad = dir.path().join("bad.yaml");
        std::fs::write(
            &bad,
            "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\ncontrollerLeaders:\n  - name: service\n",
        )
        .expect("write");
        let err = LeaderMigrationConfiguration::read(&bad).expect_err("invalid");
        let text = err.to_string();
        assert!(matches!(err, Error::InvalidMigrationConfig { .. }));
        assert!(text.contains("bad.yaml"), "{text}");
        assert!(text.contains("leaderName: Required value"), "{text}");
        assert!(
            text.contains("controllerLeaders[0].component: Required value"),
            "{text}"
        );
        let good = dir.path().join("good.yaml");
        std::fs::write(
            &good,
            "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: x\ncontrollerLeaders: [{name: service, component: cloud-controller-manager}]\n",
        )
        .expect("write");
        let c = LeaderMigrationConfiguration::read(&good).expect("good");
        assert_eq!(c.leader_name, "x");
    }

    const SERVICE: (&str, &[&str]) = ("service-lb-controller", &["service", "service-controller"]);
    const ROUTE: (&str, &[&str]) = ("node-route-controller", &["route", "route-controller"]);
    const LIFECYCLE: (&str, &[&str]) =
        ("cloud-node-lifecycle-controller", &["cloud-node-lifecycle"]);
    const NODE: (&str, &[&str]) = ("cloud-node-controller", &["cloud-node"]);

    fn config(leaders: &[(&str, &str)]) -> LeaderMigrationConfiguration {
        LeaderMigrationConfiguration {
            leader_name: "m".into(),
            resource_lock: "leases".into(),
            controller_leaders: leaders
                .iter()
                .map(|(n, c)| ControllerLeader {
                    name: (*n).into(),
                    component: (*c).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn filter_places_by_component_and_wildcard() {
        let cfg = config(&[
            ("service", "kube-controller-manager"),
            ("route-controller", "cloud-controller-manager"),
            ("cloud-node-lifecycle-controller", "*"),
        ]);
        let kcm = Migrator::new(cfg.clone(), "kube-controller-manager");
        let ccm = Migrator::new(cfg, "cloud-controller-manager");
        let svc = [SERVICE.0, SERVICE.1[0], SERVICE.1[1]];
        assert_eq!(kcm.place(&svc), Placement::Migration);
        assert_eq!(
            ccm.place(&svc),
            Placement::Elsewhere("kube-controller-manager".into())
        );
        let route = [ROUTE.0, ROUTE.1[0], ROUTE.1[1]];
        assert_eq!(
            kcm.place(&route),
            Placement::Elsewhere("cloud-controller-manager".into())
        );
        assert_eq!(ccm.place(&route), Placement::Migration);
        // `*`: both would run it, each only while holding the migration Lease.
        let lc = [LIFECYCLE.0, LIFECYCLE.1[0]];
        assert_eq!(kcm.place(&lc), Placement::Migration);
        assert_eq!(ccm.place(&lc), Placement::Migration);
        // Not listed: the main Lease.
        assert_eq!(ccm.place(&[NODE.0, NODE.1[0]]), Placement::Main);
    }

    #[test]
    fn split_keeps_order_and_reports_unmatched_names() {
        let cfg = config(&[
            ("service", "cloud-controller-manager"),
            ("node-ipam-controller", "kube-controller-manager"),
            ("cloud-node-lifecycle", "kube-controller-manager"),
        ]);
        let ccm = Migrator::new(cfg, "cloud-controller-manager");
        let s = ccm.split(&[NODE, LIFECYCLE, SERVICE, ROUTE]);
        assert_eq!(
            s,
            Split {
                main: vec!["cloud-node-controller", "node-route-controller"],
                migration: vec!["service-lb-controller"],
                elsewhere: vec![(
                    "cloud-node-lifecycle-controller",
                    "kube-controller-manager".into()
                )],
                unmatched: vec!["node-ipam-controller".into()],
            }
        );
        // Upstream's default configuration, read by either component, moves the same three.
        for component in ["kube-controller-manager", "cloud-controller-manager"] {
            let m = Migrator::new(LeaderMigrationConfiguration::default(), component);
            let s = m.split(&[NODE, LIFECYCLE, SERVICE, ROUTE]);
            assert_eq!(s.main, ["cloud-node-controller"]);
            assert_eq!(
                s.migration,
                [
                    "cloud-node-lifecycle-controller",
                    "service-lb-controller",
                    "node-route-controller"
                ]
            );
            assert!(s.elsewhere.is_empty() && s.unmatched.is_empty(), "{s:?}");
        }
    }

    #[test]
    fn last_matching_entry_wins() {
        let cfg = config(&[
            ("service", "kube-controller-manager"),
            ("service-lb-controller", "cloud-controller-manager"),
        ]);
        let ccm = Migrator::new(cfg, "cloud-controller-manager");
        assert_eq!(ccm.place(&[SERVICE.0, SERVICE.1[0]]), Placement::Migration);
    }

    #[test]
    fn upstream_checks_on_names_and_components() {
        let mut c = config(&[
            ("service", "cloud-controller-manager"),
            ("route", "kcm"),
            ("service", "*"),
        ]);
        c.leader_name = "Not_A.DNS-name".into();
        let errs = c.validate().expect_err("invalid");
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(
            errs[0].starts_with("leaderName: Invalid value: \"Not_A.DNS-name\""),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with("controllerLeaders[1].component: Unsupported value: \"kcm\""),
            "{errs:?}"
        );
        assert_eq!(
            errs[2],
            "controllerLeaders[2].name: Duplicate value: \"service\""
        );
        for bad in ["-a", "a/b", "../lm", &"a".repeat(254)] {
            let c = LeaderMigrationConfiguration {
                leader_name: bad.to_string(),
                ..LeaderMigrationConfiguration::default()
            };
            let errs = c.validate().expect_err(bad);
            assert!(errs[0].starts_with("leaderName: Invalid value"), "{errs:?}");
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use serde_yaml::Value;

        /// A field's value: usually a string (valid or not), sometimes an extreme number or
        /// a wrong type holding one (the structure-preserving mutation). `true` = wrong type.
        fn field(valid: &'static [&'static str]) -> impl Strategy<Value = (Value, bool)> {
            prop_oneof![
                4 => prop::sample::select(valid).prop_map(|s| (Value::from(s), false)),
                2 => "[a-zA-Z0-9*._-]{0,20}".prop_map(|s| (Value::from(s), false)),
                // YAML scalars read as strings (then fail validation); collections do not.
                1 => prop_oneof![
                    any::<i64>().prop_map(Value::from),
                    any::<u64>().prop_map(Value::from),
                    any::<f64>().prop_map(Value::from),
                    Just(Value::from(f64::NAN)),
                    Just(Value::from(f64::INFINITY)),
                    Just(Value::from(-1e308)),
                    any::<bool>().prop_map(Value::from),
                ].prop_map(|v| (v, false)),
                1 => prop_oneof![
                    any::<i64>().prop_map(|n| Value::Sequence(vec![Value::from(n)])),
                    any::<f64>().prop_map(|f| {
                        let mut m = serde_yaml::Mapping::new();
                        m.insert("n".into(), f.into());
                        Value::Mapping(m)
                    }),
                ].prop_map(|v| (v, true)),
            ]
        }

        const SAMPLE: &str = "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: cloud-provider-extraction-migration\ncontrollerLeaders:\n  - name: route\n    component: '*'\n  - {name: service, component: cloud-controller-manager}\n";

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(hypercloud_cloudprovider::fuzz::CASES))]

            /// Any text, and the sample's text mutated (not only its values): decoded or
            /// refused with a message, never a panic; a decoded one validates or names fields.
            #[test]
            fn arbitrary_and_mutated_text_never_panics(
                text in prop_oneof![
                    hypercloud_cloudprovider::fuzz::arbitrary_text(),
                    hypercloud_cloudprovider::fuzz::mutated(SAMPLE),
                ],
            ) {
                match LeaderMigrationConfiguration::decode(&text) {
                    Err(e) => prop_assert!(!e.is_empty() && e.len() < 4096, "{e}"),
                    Ok(c) => {
                        if let Err(errs) = c.validate() {
                            prop_assert!(errs.iter().all(|e| e.contains(':')), "{errs:?}");
                        }
                    }
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            /// Decoding and validating never panic; every problem names its field.
            #[test]
            fn decode_and_validate_name_the_field(
                version in prop::sample::select(&["v1", "v1beta1", "v1alpha1", "v2"][..]),
                leader in field(&["m", "cloud-provider-extraction-migration", "Bad_Name", ""]),
                leaders in prop::collection::vec(
                    (field(&["service", "route", "cloud-node-lifecycle", ""]),
                     field(&["kube-controller-manager", "cloud-controller-manager", "*", "kcm", ""])),
                    0..5,
                ),
            ) {
                let mut doc = serde_yaml::Mapping::new();
                doc.insert("apiVersion".into(), format!("{API_GROUP}/{version}").into());
                doc.insert("kind".into(), KIND.into());
                doc.insert("leaderName".into(), leader.0);
                let mut wrong = Vec::new();
                if leader.1 { wrong.push("leaderName"); }
                let list = leaders.into_iter().map(|((name, bad_name), (component, bad_component))| {
                    if bad_name { wrong.push("name"); }
                    if bad_component { wrong.push("component"); }
                    let mut m = serde_yaml::Mapping::new();
                    m.insert("name".into(), name);
                    m.insert("component".into(), component);
                    Value::Mapping(m)
                }).collect();
                doc.insert("controllerLeaders".into(), Value::Sequence(list));
                let text = serde_yaml::to_string(&doc).expect("yaml");
                match LeaderMigrationConfiguration::decode(&text) {
                    Err(e) if version == "v2" => prop_assert!(e.starts_with("apiVersion:"), "{e}"),
                    Err(e) => prop_assert!(
                        wrong.iter().any(|k| e.contains(k)),
                        "error names none of the mistyped keys {wrong:?}: {e}"
                    ),
                    Ok(c) => {
                        prop_assert!(wrong.is_empty() || version == "v2", "{wrong:?} accepted: {c:?}");
                        if let Err(errs) = c.validate() {
                            for e in errs {
                                prop_assert!(
                                    ["leaderName", "resourceLock", "controllerLeaders["].iter().any(|f| e.starts_with(f)),
                                    "{e}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
