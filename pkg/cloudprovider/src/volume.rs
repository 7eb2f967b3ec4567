//! Volume helpers shared by the apiserver's PersistentVolumeLabel admission, the
//! cloud-controller-manager's PV labelling and the in-tree volume controllers (upstream
//! `k8s.io/cloud-provider/volume/helpers`): the node affinity a cloud volume's zone/region
//! labels imply, sizes rounded up to GiB (`rounding.go`) and the zone of a new volume
//! (`zones.go`); and which in-tree plugin volumes a pod uses, read the same way by the
//! attach/detach controller and the kubelet (upstream `pkg/volume/util`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, NodeSelectorRequirement, PersistentVolume, Pod};

use crate::VolumeAttacher;

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

/// Bytes in a GiB.
pub const GIB: u128 = 1 << 30;

/// A resource quantity (`10Gi`, `1.5G`, `500M`, `1e9`, `100m`) in bytes, rounded up to a whole
/// byte; `None` when it does not parse or is negative.
pub fn quantity_bytes(q: &str) -> Option<u128> {
    let q = q.trim();
    let q = q.strip_prefix('+').unwrap_or(q);
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = format!("{int}{frac}");
    let mantissa: u128 = digits.parse().ok()?;
    let mut den: u128 = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
    let mut num: u128 = 1;
    match suffix {
        "" => {}
        "m" => den = den.checked_mul(1000)?,
        "k" => num = 1_000,
        "M" => num = 1_000_000,
        "G" => num = 1_000_000_000,
        "T" => num = 1_000_000_000_000,
        "P" => num = 1_000_000_000_000_000,
        "E" => num = 1_000_000_000_000_000_000,
        "Ki" => num = 1 << 10,
        "Mi" => num = 1 << 20,
        "Gi" => num = 1 << 30,
        "Ti" => num = 1 << 40,
        "Pi" => num = 1 << 50,
        "Ei" => num = 1 << 60,
        exp => {
            let e = exp.strip_prefix(['e', 'E'])?;
            let e: u32 = e.strip_prefix('+').unwrap_or(e).parse().ok()?;
            num = 10u128.checked_pow(e)?;
        }
    }
    let total = mantissa.checked_mul(num)?;
    Some(total.div_ceil(den))
}

/// A quantity in GiB, rounded up (upstream `RoundUpToGiB`); at least 1 for any non-zero size.
pub fn round_up_to_gib(q: &str) -> Option<u64> {
    u64::try_from(quantity_bytes(q)?.div_ceil(GIB)).ok()
}

/// The zone for a new volume of claim `pvc_name` among `zones` (upstream
/// `ChooseZoneForVolume`): a hash of the name picks it, and claims named like a StatefulSet's
/// (`claim-set-N`) hash only the set's name and add N, so a set's volumes spread round-robin
/// and one member's claims share a zone. `None` when there are no zones.
pub fn choose_zone_for_volume(zones: &[String], pvc_name: &str) -> Option<String> {
    let mut zones: Vec<&String> = zones.iter().filter(|z| !z.is_empty()).collect();
    zones.sort();
    zones.dedup();
    if zones.is_empty() {
        return None;
    }
    let mut hashed = pvc_name;
    let mut index: u32 = 0;
    if let Some((prefix, id)) = pvc_name.rsplit_once('-') {
        if let Ok(n) = id.parse::<u32>() {
            index = n;
            hashed = prefix.rsplit_once('-').map_or(prefix, |(_, set)| set);
        }
    }
    // FNV-1 (32 bit), Go's `fnv.New32`.
    let hash = hashed.bytes().fold(2_166_136_261u32, |h, b| {
        h.wrapping_mul(16_777_619) ^ u32::from(b)
    });
    let len = u32::try_from(zones.len()).ok()?;
    let i = usize::try_from(hash.wrapping_add(index) % len).ok()?;
    zones.get(i).map(|z| (*z).clone())
}

/// The unique name of a plugin's volume, as `node.status.volumesAttached` and
/// `volumesInUse` list it (upstream `GetUniqueVolumeName`): `kubernetes.io/cinder/<id>`.
pub fn unique_volume_name(plugin: &str, volume_id: &str) -> String {
    format!("{plugin}/{volume_id}")
}

/// Whether a pod no longer needs its volumes (upstream `IsPodTerminated`): it succeeded or
/// failed, or it is being deleted and none of its containers runs.
pub fn pod_terminated(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    if matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return true;
    }
    if pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let running = |list: Option<&Vec<ContainerStatus>>| {
        list.into_iter()
            .flatten()
            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
    };
    !status.is_some_and(|s| {
        running(s.container_statuses.as_ref())
            || running(s.init_container_statuses.as_ref())
            || running(s.ephemeral_container_statuses.as_ref())
    })
}

/// Whether a PV's access modes let it be attached to several Nodes (upstream
/// `IsMultiAttachAllowed` for PVs: none given, or no `ReadWriteOnce`/`ReadWriteOncePod`).
pub fn pv_multi_attach_allowed(pv: &PersistentVolume) -> bool {
    let modes = pv
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.clone())
        .unwrap_or_default();
    !modes
        .iter()
        .any(|m| m == "ReadWriteOnce" || m == "ReadWriteOncePod")
}

/// One volume of an in-tree plugin that a pod uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodVolume {
    /// [`unique_volume_name`].
    pub unique_name: String,
    /// The cloud's volume ID.
    pub volume_id: String,
    /// The PV's name, or the pod volume's for an inline volume (upstream names the volume so
    /// in events).
    pub spec_name: String,
    /// The pod volume's name (its directory under the pod).
    pub pod_volume_name: String,
    /// Whether it may be attached to several Nodes at once (inline volumes of these plugins
    /// never are, as upstream).
    pub multi_attach: bool,
}

/// The `attacher`'s volumes `pod` uses: inline ones, and those of its claims, which
/// `bound_pv(namespace, claim)` resolves to the PV bound to the claim (`None` while unbound
/// or unknown: that volume is left out).
pub fn pod_volumes<P>(
    pod: &Pod,
    attacher: &dyn VolumeAttacher,
    bound_pv: impl Fn(&str, &str) -> Option<P>,
) -> Vec<PodVolume>
where
    P: std::ops::Deref<Target = PersistentVolume>,
{
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let mut out = Vec::new();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let found = if let Some(id) = attacher.pod_volume_id(volume) {
            Some((id, volume.name.clone(), false))
        } else if let Some(claim) = &volume.persistent_volume_claim {
            bound_pv(&ns, &claim.claim_name).and_then(|pv| {
                let id = attacher.pv_volume_id(pv.spec.as_ref()?)?;
                let name = pv.metadata.name.clone().unwrap_or_default();
                Some((id, name, pv_multi_attach_allowed(&pv)))
            })
        } else {
            None
        };
        if let Some((volume_id, spec_name, multi_attach)) = found {
            out.push(PodVolume {
                unique_name: unique_volume_name(attacher.plugin_name(), &volume_id),
                volume_id,
                spec_name,
                pod_volume_name: volume.name.clone(),
                multi_attach,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_round_up_to_gib() {
        assert_eq!(round_up_to_gib("1Gi"), Some(1));
        assert_eq!(round_up_to_gib("1"), Some(1));
        assert_eq!(round_up_to_gib("1.5Gi"), Some(2));
        assert_eq!(round_up_to_gib("1G"), Some(1));
        assert_eq!(round_up_to_gib("2G"), Some(2));
        assert_eq!(round_up_to_gib("1025Mi"), Some(2));
        assert_eq!(round_up_to_gib("3e9"), Some(3));
        assert_eq!(round_up_to_gib("0"), Some(0));
        assert_eq!(quantity_bytes("100m"), Some(1));
        assert_eq!(quantity_bytes("1Ki"), Some(1024));
        assert_eq!(quantity_bytes("-1Gi"), None);
        assert_eq!(quantity_bytes("Gi"), None);
        assert_eq!(quantity_bytes("1Xi"), None);
    }

    #[test]
    fn zones_are_chosen_by_name_and_statefulset_index() {
        let zones = vec!["b".to_string(), "a".to_string(), "c".to_string()];
        assert_eq!(choose_zone_for_volume(&[], "x"), None);
        let z = choose_zone_for_volume(&zones, "data").expect("zone");
        assert_eq!(choose_zone_for_volume(&zones, "data"), Some(z));
        // A StatefulSet's members round-robin over the sorted zones.
        let picks: Vec<String> = (0..3)
            .map(|i| choose_zone_for_volume(&zones, &format!("www-web-{i}")).expect("zone"))
            .collect();
        let mut sorted = picks.clone();
        sorted.sort();
        assert_eq!(sorted, ["a", "b", "c"]);
        // Two claims of one member share a zone.
        assert_eq!(
            choose_zone_for_volume(&zones, "www-web-1"),
            choose_zone_for_volume(&zones, "logs-web-1")
        );
    }

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
