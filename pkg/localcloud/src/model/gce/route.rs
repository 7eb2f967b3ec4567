//! A route (`compute#route`, global): traffic to `destRange` in `network` goes to exactly one
//! next hop. Upstream equivalent: Compute Engine's `Route`.

use serde::{Deserialize, Serialize};

use super::{Object, Spec};
use crate::model::Names;

/// A stored route. (The API reaches routes only through the generic handlers, so outside
/// tests nothing names this alias.)
#[allow(dead_code)]
pub(crate) type Route = Object<RouteSpec>;

/// A route's fields (`network` and `nextHopInstance` as full links).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RouteSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub network: String,
    pub dest_range: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_hop_instance: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_hop_ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_hop_gateway: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_hop_network: Option<String>,
    pub priority: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    pub route_type: String,
    pub route_status: String,
}

impl Spec for RouteSpec {
    const COLLECTION: &'static str = "routes";
    const KIND: &'static str = "compute#route";
    const TABLE: &'static str = "gce_routes";
    const NAMES: Names = Names {
        one: "route",
        many: "routes",
        title: "Route",
    };
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Record;
    use crate::store::Store;

    fn spec() -> RouteSpec {
        serde_json::from_value(serde_json::json!({
            "network": "https://h/compute/v1/projects/p/global/networks/default",
            "destRange": "10.0.1.0/24", "nextHopIp": "10.0.0.5", "priority": 1000,
            "routeType": "STATIC", "routeStatus": "ACTIVE",
        }))
        .unwrap()
    }

    #[test]
    fn stored_by_scope_and_name_per_project() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let r = Route::new("p1", "r1".into(), "global".into(), spec());
        store.write(|tx| r.put(tx)).unwrap();
        store.read(|v| {
            assert_eq!(Route::get_at(v, "global", "r1"), Some(r.clone()));
            assert_eq!(Route::get_in(v, "p2", "global", "r1"), None);
            assert_eq!(Route::list_in(v, "p1").len(), 1);
        });
        store
            .write(|tx| Ok::<_, crate::Error>(r.remove(tx)))
            .unwrap();
        store.read(|v| assert!(Route::list(v).is_empty()));
    }

    #[test]
    fn fields_are_gce_names_without_absent_ones() {
        let r = Route::new("p", "r".into(), "global".into(), spec());
        let f = r.fields();
        assert_eq!(f["destRange"], "10.0.1.0/24");
        assert_eq!(f["nextHopIp"], "10.0.0.5");
        assert!(!f.contains_key("nextHopInstance") && !f.contains_key("tags"));
    }
}
