//! An unmanaged instance group (`compute#instanceGroup`, zonal): instances of its zone that a
//! backend service sends to. Upstream equivalent: Compute Engine's `InstanceGroup`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::scoped_ref;

/// An instance group's fields. `instances` (full links) is the membership, which GCE does not
/// show on the group (`size` instead; `listInstances` lists them).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InstanceGroupSpec {
    pub description: Option<String>,
    pub network: Option<String>,
    pub subnetwork: Option<String>,
    pub named_ports: Option<Vec<Value>>,
    #[serde(default)]
    pub instances: Vec<String>,
}

resource! {
    /// A stored instance group.
    InstanceGroup = Object<InstanceGroupSpec>,
    one: "instanceGroup", many: "instanceGroups", title: "Instance group",
    shown: InstanceGroupSpec::shown
}

impl InstanceGroupSpec {
    /// The fields as GCE shows them: `size` in place of the members, and a fingerprint.
    pub(crate) fn shown(fields: &mut Map<String, Value>) {
        let size = fields
            .remove("instances")
            .and_then(|v| v.as_array().map(Vec::len))
            .unwrap_or(0);
        fields.insert("size".into(), json!(size));
        fields.insert(
            "fingerprint".into(),
            json!(super::fingerprint(&Value::Object(fields.clone()))),
        );
    }
}

/// `(scope, name)` of an instance group reference (`.../zones/z/instanceGroups/g`).
pub(crate) fn instance_group_key(reference: &str) -> Option<(String, String)> {
    let (zone, name) = scoped_ref(reference, "zones", "instanceGroups")?;
    (!name.is_empty()).then(|| (format!("zones/{zone}"), name.to_owned()))
}
