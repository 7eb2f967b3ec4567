//! Volume helpers shared by the apiserver's PersistentVolumeLabel admission and the
//! cloud-controller-manager's PV labelling (upstream `k8s.io/cloud-provider/volume/helpers`):
//! the node affinity a cloud volume's zone/region labels imply.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

use crate::wellknown::{LABEL_FAILURE_DOMAIN_ZONE, LABEL_TOPOLOGY_ZONE};

/// Separates the zones of a volume that spans several (upstream `LabelMultiZoneDelimiter`).
pub const MULTI_ZONE_DELIMITER: &str = "__";

/// The zones in a zone label value, sorted and without duplicates (upstream `LabelZonesToSet`).
pub fn zones_from_label(value: &str) -> Vec<String> {
    let mut zones: Vec<String> = value
        .split(MULTI_ZONE_DELIMITER)
        .filter(|z| !z.is_empty())
        .map(str::to_string)
        .collect();
    zones.sort();
    zones.dedup();
    zones
}

/// One `In` requirement per label: a PV with these labels may only be used on nodes that
/// carry them (zone labels may list several zones).
pub fn node_selector_requirements(
    labels: &BTreeMap<String, String>,
) -> Vec<NodeSelectorRequirement> {
    labels
        .iter()
        .map(|(k, v)| NodeSelectorRequirement {
            key: k.clone(),
            operator: "In".into(),
            values: Some(
                if k == LABEL_TOPOLOGY_ZONE || k == LABEL_FAILURE_DOMAIN_ZONE {
                    zones_from_label(v)
                } else {
                    vec![v.clone()]
                },
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_labels_split_other_labels_do_not() {
        let labels = BTreeMap::from([
            (LABEL_TOPOLOGY_ZONE.to_string(), "b__a__b".to_string()),
            (
                "topology.kubernetes.io/region".to_string(),
                "r__1".to_string(),
            ),
        ]);
        let reqs = node_selector_requirements(&labels);
        assert_eq!(reqs.len(), 2);
        let zone = reqs
            .iter()
            .find(|r| r.key == LABEL_TOPOLOGY_ZONE)
            .expect("zone");
        assert_eq!(zone.values, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(zone.operator, "In");
        let region = reqs
            .iter()
            .find(|r| r.key != LABEL_TOPOLOGY_ZONE)
            .expect("region");
        assert_eq!(region.values, Some(vec!["r__1".to_string()]));
    }
}
