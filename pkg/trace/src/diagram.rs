//! From trace records to a diagram: who the participants are and which calls to draw, in
//! which order.
//!
//! Records that normalise to the same call (same component, provider, method, arguments and
//! outcome) are drawn once. `×N` counts the distinct raw arguments behind a message (three
//! nodes asked the same question), never how often a call repeated: how many passes a
//! periodic controller made before a trace ended depends on timing, and the diagram must
//! not.

use std::collections::{BTreeMap, BTreeSet};

use hypercloud_cloudprovider::TraceRecord;

use crate::normalise::{args_label, compact, error_kind, result_label};

/// How to order the messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// By component (node side first: kubelet-helper, apiserver-plugin, controller-manager,
    /// cloud-controller-manager), then by method in the order a node or service meets them
    /// (initialize, identity, zone, metadata, existence, load balancer, routes...). The same
    /// for every run of a scenario: concurrent controllers and separate processes interleave
    /// differently each time, so wall-clock order is not stable.
    #[default]
    Canonical,
    /// By the first time each message was seen, ties by the canonical order. Closer to what
    /// happened in one run, but not stable across runs.
    Time,
}

/// What to draw besides the calls.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Components to show even when they made no cloud call (`kubelet-helper` with
    /// `--cloud-provider=external`); each gets a "no cloud calls" note.
    pub participants: Vec<String>,
    /// A title line.
    pub title: Option<String>,
    /// Message order.
    pub order: Order,
}

/// Whether a participant is a component or a cloud provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// A hypercloud personality (the caller).
    Component,
    /// A cloud provider (the callee).
    Provider,
}

/// One lifeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant {
    /// An identifier safe for Mermaid (`kubelet_helper`).
    pub id: String,
    /// What the box says (`kubelet-helper`, `local (cloud)`).
    pub label: String,
    /// Caller or callee.
    pub role: Role,
}

/// A call and its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Index of the calling participant.
    pub from: usize,
    /// Index of the provider participant.
    pub to: usize,
    /// `method(args)`, with ` ×N` when N distinct arguments normalised to it.
    pub request: String,
    /// `ok`, a short result, or `error: Kind`.
    pub response: String,
    /// Whether the call failed.
    pub failed: bool,
}

/// One row of the diagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A call with its answer.
    Call(Call),
    /// A note over one participant.
    Note {
        /// Index of the participant.
        over: usize,
        /// The text.
        text: String,
    },
}

/// A sequence diagram, ready to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagram {
    /// The title, if any.
    pub title: Option<String>,
    /// Lifelines, left to right: components, then providers.
    pub participants: Vec<Participant>,
    /// Rows, top to bottom.
    pub steps: Vec<Step>,
}

/// The components in the order they appear: node side first, then the control plane.
const COMPONENT_ORDER: &[&str] = &[
    "kubelet-helper",
    "kubelet",
    "cloud-node-manager",
    "apiserver-plugin",
    "kube-apiserver",
    "controller-manager",
    "kube-controller-manager",
    "cloud-controller-manager",
];

/// The provider methods in the order a node, then a volume, a service and a route meet them.
const METHOD_ORDER: &[&str] = &[
    "initialize",
    // a node finds out who it is (kubelet, in-tree)
    "current_node_name",
    "instance_id",
    "node_addresses",
    "node_addresses_by_provider_id",
    "instance_type",
    "instance_type_by_provider_id",
    "get_zone",
    "get_zone_by_node_name",
    "get_zone_by_provider_id",
    // the cloud-node controller initialises it
    "instance_metadata",
    // node lifecycle
    "instance_exists",
    "instance_exists_by_provider_id",
    "instance_shutdown",
    "instance_shutdown_by_provider_id",
    // apiserver duties
    "add_ssh_key_to_all_instances",
    "get_labels_for_volume",
    // in-tree volume controllers: provision, grow, reclaim
    "create_volume",
    "expand_volume",
    // attach/detach controller and kubelet: attach, find the device, detach
    "attach_disk",
    "disk_is_attached",
    "disks_are_attached",
    "get_attachment_disk_path",
    "detach_disk",
    "delete_volume",
    // service controller
    "get_load_balancer",
    "ensure_load_balancer",
    "update_load_balancer",
    "ensure_load_balancer_deleted",
    // route controller
    "list_routes",
    "create_route",
    "delete_route",
    "list_clusters",
    "master",
];

fn rank(table: &[&str], name: &str) -> usize {
    table.iter().position(|n| *n == name).unwrap_or(table.len())
}

/// The identity of a message after normalisation, in canonical sort order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    component_rank: usize,
    component: String,
    provider: String,
    method_rank: usize,
    method: String,
    args: String,
    failed: bool,
    outcome: String,
}

#[derive(Default)]
struct Seen {
    first_ts: u64,
    /// The raw (not normalised) arguments, to count distinct subjects.
    subjects: BTreeSet<String>,
}

/// Builds the diagram from records in any order.
pub fn build(records: &[TraceRecord], options: &Options) -> Diagram {
    let mut groups: BTreeMap<Key, Seen> = BTreeMap::new();
    let mut components: BTreeSet<(usize, String)> = BTreeSet::new();
    let mut providers: BTreeSet<String> = BTreeSet::new();
    for r in records {
        let (failed, outcome) = match &r.error {
            Some(e) => (true, format!("error: {}", error_kind(e))),
            None => (false, result_label(r.result.as_ref())),
        };
        let key = Key {
            component_rank: rank(COMPONENT_ORDER, &r.component),
            component: r.component.clone(),
            provider: r.provider.clone(),
            method_rank: rank(METHOD_ORDER, &r.method),
            method: r.method.clone(),
            args: args_label(&r.args),
            failed,
            outcome,
        };
        components.insert((key.component_rank, r.component.clone()));
        providers.insert(r.provider.clone());
        let seen = groups.entry(key).or_insert_with(|| Seen {
            first_ts: r.ts_unix_ms,
            ..Seen::default()
        });
        seen.first_ts = seen.first_ts.min(r.ts_unix_ms);
        seen.subjects.insert(compact(&r.args, false));
    }
    let called: BTreeSet<String> = components.iter().map(|(_, c)| c.clone()).collect();
    for p in &options.participants {
        components.insert((rank(COMPONENT_ORDER, p), p.clone()));
    }

    let mut participants = Vec::new();
    let mut index: BTreeMap<(Role, String), usize> = BTreeMap::new();
    let mut used_ids = BTreeSet::new();
    for (_, c) in &components {
        index.insert((Role::Component, c.clone()), participants.len());
        participants.push(Participant {
            id: unique_id(&mermaid_id(c), &mut used_ids),
            label: c.clone(),
            role: Role::Component,
        });
    }
    for p in &providers {
        index.insert((Role::Provider, p.clone()), participants.len());
        participants.push(Participant {
            id: unique_id(&mermaid_id(&format!("cloud_{p}")), &mut used_ids),
            label: format!("{p} (cloud)"),
            role: Role::Provider,
        });
    }

    let mut steps = Vec::new();
    for (_, c) in &components {
        if !called.contains(c) {
            steps.push(Step::Note {
                over: index[&(Role::Component, c.clone())],
                text: "no cloud calls".into(),
            });
        }
    }
    let mut calls: Vec<(Key, Seen)> = groups.into_iter().collect();
    if options.order == Order::Time {
        calls.sort_by(|(ka, a), (kb, b)| a.first_ts.cmp(&b.first_ts).then_with(|| ka.cmp(kb)));
    }
    for (key, seen) in calls {
        let mut request = format!("{}({})", key.method, key.args);
        if seen.subjects.len() > 1 {
            request.push_str(&format!(" ×{}", seen.subjects.len()));
        }
        steps.push(Step::Call(Call {
            from: index[&(Role::Component, key.component)],
            to: index[&(Role::Provider, key.provider)],
            request,
            response: key.outcome,
            failed: key.failed,
        }));
    }
    Diagram {
        title: options.title.clone(),
        participants,
        steps,
    }
}

fn mermaid_id(name: &str) -> String {
    let id: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if id.starts_with(|c: char| c.is_ascii_alphabetic()) {
        id
    } else {
        format!("p_{id}")
    }
}

fn unique_id(base: &str, used: &mut BTreeSet<String>) -> String {
    let mut id = base.to_string();
    let mut n = 2;
    while !used.insert(id.clone()) {
        id = format!("{base}_{n}");
        n += 1;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    pub(crate) fn rec(ts: u64, component: &str, method: &str, args: Value) -> TraceRecord {
        TraceRecord {
            ts_unix_ms: ts,
            component: component.into(),
            provider: "local".into(),
            method: method.into(),
            args,
            result: None,
            error: None,
            latency_ms: 1.0,
        }
    }

    #[test]
    fn repeated_and_per_node_calls_collapse_into_one_message() {
        let mut records = Vec::new();
        for pass in 0..3 {
            for n in 1..=3 {
                let mut r = rec(
                    100 * pass + n,
                    "cloud-controller-manager",
                    "instance_exists",
                    json!({"node": format!("node-{n}")}),
                );
                r.result = Some(json!(true));
                records.push(r);
            }
        }
        records.push(rec(
            1,
            "cloud-controller-manager",
            "initialize",
            json!({"client": false}),
        ));
        records.push(rec(
            2,
            "cloud-controller-manager",
            "initialize",
            json!({"client": false}),
        ));
        let d = build(&records, &Options::default());
        let calls: Vec<_> = d
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Call(c) => Some((c.request.as_str(), c.response.as_str())),
                Step::Note { .. } => None,
            })
            .collect();
        assert_eq!(
            calls,
            vec![
                ("initialize(client=false)", "ok"),
                ("instance_exists(node-{n}) ×3", "true"),
            ]
        );
    }

    #[test]
    fn outcomes_split_messages_and_errors_are_marked() {
        let mut ok = rec(
            1,
            "kube-controller-manager",
            "instance_exists",
            json!({"node": "node-1"}),
        );
        ok.result = Some(json!(true));
        let mut gone = rec(
            2,
            "kube-controller-manager",
            "instance_exists",
            json!({"node": "node-2"}),
        );
        gone.error = Some("instance not found".into());
        let d = build(&[gone, ok], &Options::default());
        let calls: Vec<_> = d
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Call(c) => Some((c.response.clone(), c.failed)),
                Step::Note { .. } => None,
            })
            .collect();
        assert_eq!(
            calls,
            vec![
                ("true".to_string(), false),
                ("error: InstanceNotFound".to_string(), true)
            ]
        );
    }

    #[test]
    fn participants_are_ordered_node_side_first_and_declared_ones_get_a_note() {
        let records = vec![
            rec(5, "cloud-controller-manager", "initialize", json!({})),
            rec(9, "zz-custom", "initialize", json!({})),
            rec(7, "kubelet-helper", "initialize", json!({})),
        ];
        let options = Options {
            participants: vec!["apiserver-plugin".into(), "kubelet-helper".into()],
            ..Options::default()
        };
        let d = build(&records, &options);
        let labels: Vec<_> = d.participants.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(
            labels,
            vec![
                "kubelet-helper",
                "apiserver-plugin",
                "cloud-controller-manager",
                "zz-custom",
                "local (cloud)"
            ]
        );
        assert_eq!(d.participants[0].id, "kubelet_helper");
        assert_eq!(d.participants[4].id, "cloud_local");
        assert_eq!(
            d.steps[0],
            Step::Note {
                over: 1,
                text: "no cloud calls".into()
            }
        );
        assert_eq!(d.steps.len(), 4, "one note, three calls");
    }

    #[test]
    fn time_order_follows_first_occurrence() {
        let records = vec![
            rec(30, "kubelet-helper", "initialize", json!({})),
            rec(
                10,
                "cloud-controller-manager",
                "instance_metadata",
                json!({"node": "n"}),
            ),
            rec(20, "cloud-controller-manager", "initialize", json!({})),
        ];
        let d = build(
            &records,
            &Options {
                order: Order::Time,
                ..Options::default()
            },
        );
        let requests: Vec<_> = d
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Call(c) => Some((d.participants[c.from].label.as_str(), c.request.as_str())),
                Step::Note { .. } => None,
            })
            .collect();
        assert_eq!(
            requests,
            vec![
                ("cloud-controller-manager", "instance_metadata(n)"),
                ("cloud-controller-manager", "initialize()"),
                ("kubelet-helper", "initialize()"),
            ]
        );
    }

    #[test]
    fn ids_are_mermaid_safe_and_unique() {
        let mut used = BTreeSet::new();
        assert_eq!(
            unique_id(&mermaid_id("kube-controller-manager"), &mut used),
            "kube_controller_manager"
        );
        assert_eq!(
            unique_id(&mermaid_id("kube_controller-manager"), &mut used),
            "kube_controller_manager_2"
        );
        assert_eq!(mermaid_id("9lives"), "p_9lives");
    }
}
