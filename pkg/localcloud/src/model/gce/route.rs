//! A route (`compute#route`, global): traffic to `destRange` in `network` goes to exactly one
//! next hop. Upstream equivalent: Compute Engine's `Route`.

use serde::{Deserialize, Serialize};

/// A route's fields (`network` and `nextHopInstance` as full links).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RouteSpec {
    pub description: Option<String>,
    pub network: String,
    pub dest_range: String,
    pub next_hop_instance: Option<String>,
    pub next_hop_ip: Option<String>,
    pub next_hop_gateway: Option<String>,
    pub next_hop_network: Option<String>,
    pub priority: i64,
    pub tags: Option<Vec<String>>,
    pub route_type: String,
    pub route_status: String,
}

resource! {
    /// A stored route. (The API reaches routes only through the generic handlers, so outside
    /// tests nothing names this alias.)
    #[allow(dead_code)]
    Route = Object<RouteSpec>,
    one: "route", many: "routes", title: "Route"
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::gce::fixture::{spec, store_with};
    use crate::model::Record;

    fn route(project: &str, name: &str) -> Route {
        let fields = serde_json::json!({
            "network": "https://h/compute/v1/projects/p/global/networks/default",
            "destRange": "10.0.1.0/24", "nextHopIp": "10.0.0.5", "priority": 1000,
            "routeType": "STATIC", "routeStatus": "ACTIVE",
        });
        Route::new(project, name.into(), "global".into(), spec(fields))
    }

    #[test]
    fn stored_by_scope_and_name_per_project() {
        let r = route("p1", "r1");
        let (_dir, store) = store_with(&r);
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
        let r = route("p", "r");
        let f = r.fields();
        assert_eq!(f["destRange"], "10.0.1.0/24");
        assert_eq!(f["nextHopIp"], "10.0.0.5");
        assert!(!f.contains_key("nextHopInstance") && !f.contains_key("tags"));
    }
}
