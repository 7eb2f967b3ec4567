//! PersistentVolumeLabel (mutating; upstream `plugin/pkg/admission/storage/persistentvolume/label`):
//! a PV of a cloud volume gets the volume's zone/region labels and, so that pods using it are
//! scheduled where the volume is, a node affinity requiring them. A PV with a node affinity
//! that already constrains those keys keeps it unchanged (upstream skips the addition then).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use hypercloud_cloudprovider::volume::node_selector_requirements;
use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorTerm, PersistentVolume, VolumeNodeAffinity,
};
use kube::core::admission::AdmissionRequest;
use kube::core::DynamicObject;
use serde_json::{json, Value};

use hypercloud_cloudprovider::Chain;

use crate::review::{self, Verdict};
use crate::{Error, Webhook};

const CHECK: &str = "PersistentVolumeLabel";

/// The webhook endpoint.
pub async fn handle(State(webhook): State<Arc<Webhook>>, body: Bytes) -> Response {
    review::answer(&body, CHECK, async |req| check(&webhook, req).await).await
}

/// Decides one request.
pub async fn check(webhook: &Webhook, req: &AdmissionRequest<DynamicObject>) -> Verdict {
    let pv: PersistentVolume = match review::created(CHECK, req, "PersistentVolume") {
        Ok(pv) => pv,
        Err(verdict) => return verdict,
    };
    let Some(labeler) = webhook.cloud.pv_labeler() else {
        return Verdict::Allow;
    };
    let labels = match labeler.get_labels_for_volume(&pv).await {
        Ok(l) => l,
        Err(source) => {
            let pv = pv.metadata.name.clone().unwrap_or_default();
            return Verdict::Deny(format!(
                "{CHECK}: {}",
                Chain(&Error::LabelVolume {
                    pv,
                    source: Box::new(source)
                })
            ));
        }
    };
    if labels.is_empty() {
        return Verdict::Allow;
    }
    match patch(&pv, &labels) {
        Ok(p) => Verdict::Patch(p),
        Err(e) => Verdict::Deny(format!("{CHECK}: {}", Chain(&e))),
    }
}

/// `a~b/c` → `a~0b~1c` (RFC 6901).
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The node affinity the PV should have: every term gains the requirements, unless a term
/// already constrains one of their keys.
pub fn node_affinity(
    pv: &PersistentVolume,
    labels: &BTreeMap<String, String>,
) -> Option<VolumeNodeAffinity> {
    let reqs = node_selector_requirements(labels);
    let mut affinity = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.clone())
        .unwrap_or_default();
    let required = affinity.required.get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    let conflict = required.node_selector_terms.iter().any(|t| {
        t.match_expressions
            .iter()
            .flatten()
            .any(|e| reqs.iter().any(|r| r.key == e.key))
    });
    if conflict {
        tracing::debug!("node affinity already constrains the cloud labels; leaving it");
        return None;
    }
    for term in &mut required.node_selector_terms {
        term.match_expressions
            .get_or_insert_with(Vec::new)
            .extend(reqs.iter().cloned());
    }
    Some(affinity)
}

/// The JSON patch adding `labels` and the node affinity.
pub fn patch(
    pv: &PersistentVolume,
    labels: &BTreeMap<String, String>,
) -> crate::Result<json_patch::Patch> {
    let mut ops: Vec<Value> = Vec::new();
    if pv.metadata.labels.is_none() {
        ops.push(json!({"op": "add", "path": "/metadata/labels", "value": {}}));
    }
    for (k, v) in labels {
        ops.push(json!({"op": "add", "path": format!("/metadata/labels/{}", pointer_escape(k)), "value": v}));
    }
    if let Some(affinity) = node_affinity(pv, labels) {
        let value =
            serde_json::to_value(&affinity).map_err(|e| Error::BuildPatch(e.to_string()))?;
        ops.push(json!({"op": "add", "path": "/spec/nodeAffinity", "value": value}));
    }
    serde_json::from_value(Value::Array(ops)).map_err(|e| Error::BuildPatch(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypercloud_cloudprovider::wellknown::LABEL_TOPOLOGY_ZONE;
    use k8s_openapi::api::core::v1::NodeSelectorRequirement;
    use k8s_openapi::api::core::v1::PersistentVolumeSpec;

    fn labels(zone: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_TOPOLOGY_ZONE.to_string(), zone.to_string()),
            (
                "topology.kubernetes.io/region".to_string(),
                "r1".to_string(),
            ),
        ])
    }

    fn apply(pv: &PersistentVolume, patch: &json_patch::Patch) -> PersistentVolume {
        let mut doc = serde_json::to_value(pv).expect("json");
        json_patch::patch(&mut doc, patch).expect("patch applies");
        serde_json::from_value(doc).expect("pv")
    }

    #[test]
    fn labels_and_affinity_are_added() {
        let pv = PersistentVolume {
            spec: Some(PersistentVolumeSpec::default()),
            ..Default::default()
        };
        let out = apply(&pv, &patch(&pv, &labels("nova")).expect("patch"));
        let l = out.metadata.labels.expect("labels");
        assert_eq!(l.get(LABEL_TOPOLOGY_ZONE).map(String::as_str), Some("nova"));
        let terms = out
            .spec
            .and_then(|s| s.node_affinity)
            .and_then(|a| a.required)
            .expect("required")
            .node_selector_terms;
        assert_eq!(terms.len(), 1);
        let exprs = terms[0].match_expressions.clone().expect("exprs");
        assert_eq!(exprs.len(), 2);
        assert!(exprs.iter().all(|e| e.operator == "In"));
        assert_eq!(
            exprs
                .iter()
                .find(|e| e.key == LABEL_TOPOLOGY_ZONE)
                .and_then(|e| e.values.clone()),
            Some(vec!["nova".into()])
        );
    }

    #[test]
    fn multi_zone_values_split_and_keys_with_slashes_escape() {
        let pv = PersistentVolume {
            spec: Some(PersistentVolumeSpec::default()),
            ..Default::default()
        };
        let p = patch(&pv, &labels("b__a")).expect("patch");
        let text = serde_json::to_string(&p).expect("json");
        assert!(
            text.contains("/metadata/labels/topology.kubernetes.io~1zone"),
            "{text}"
        );
        let out = apply(&pv, &p);
        let exprs = out
            .spec
            .and_then(|s| s.node_affinity)
            .and_then(|a| a.required)
            .expect("req")
            .node_selector_terms[0]
            .match_expressions
            .clone()
            .expect("exprs");
        let zone = exprs
            .iter()
            .find(|e| e.key == LABEL_TOPOLOGY_ZONE)
            .expect("zone");
        assert_eq!(zone.values, Some(vec!["a".to_string(), "b".to_string()]));
    }

    #[test]
    fn existing_terms_each_gain_requirements_unless_they_conflict() {
        let term = |key: &str| NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(vec!["x".into()]),
            }]),
            ..Default::default()
        };
        let pv = |terms: Vec<NodeSelectorTerm>| PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                node_affinity: Some(VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let a = node_affinity(&pv(vec![term("disk"), term("rack")]), &labels("z1")).expect("added");
        for t in a.required.expect("req").node_selector_terms {
            assert_eq!(t.match_expressions.expect("exprs").len(), 3);
        }
        assert!(node_affinity(&pv(vec![term(LABEL_TOPOLOGY_ZONE)]), &labels("z1")).is_none());
        // Labels are still added when the affinity is left alone.
        let p = pv(vec![term(LABEL_TOPOLOGY_ZONE)]);
        let out = apply(&p, &patch(&p, &labels("z1")).expect("patch"));
        assert!(out
            .metadata
            .labels
            .expect("labels")
            .contains_key(LABEL_TOPOLOGY_ZONE));
    }
}
