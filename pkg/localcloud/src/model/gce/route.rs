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
