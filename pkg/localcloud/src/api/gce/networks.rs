//! Networks: the project's Neutron networks that are not external, by name (`default` is the
//! cloud's default network unless one is really called so), read-only.

use super::*;
use crate::api::network::{Network, Subnet, NETWORKS, SUBNETS};

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    Router::new()
        .route(&format!("{p}/global/networks"), get(list_networks))
        .route(&format!("{p}/global/networks/{{name}}"), get(get_network))
}

/// The Neutron network a GCE network reference names; `default` is the cloud's default
/// network unless a network is really called so.
pub(crate) fn find_network(r: &impl Read, reference: &str) -> Option<Network> {
    let name = m::last_segment(reference);
    let networks = r.list::<Network>(NETWORKS);
    let by_name = |n: &str| {
        networks
            .iter()
            .find(|x| x.name == n && !x.external)
            .cloned()
    };
    by_name(name).or_else(|| {
        (name == "default")
            .then(|| by_name(crate::defaults::NETWORK))
            .flatten()
    })
}

fn network_view(s: &Scope<'_>, r: &impl Read, n: &Network) -> Value {
    let subnets: Vec<String> = r
        .list::<Subnet>(SUBNETS)
        .into_iter()
        .filter(|x| x.network_id == n.meta.id)
        .map(|x| s.link(&format!("regions/{}/subnetworks/{}", s.region(), x.name)))
        .collect();
    json!({
        "kind": "compute#network", "id": m::numeric_id(&n.meta.id).to_string(), "name": n.name,
        "description": n.description, "creationTimestamp": m::timestamp(&n.meta.created_at),
        "autoCreateSubnetworks": false, "subnetworks": subnets, "mtu": n.mtu,
        "routingConfig": {"routingMode": "REGIONAL"}, "selfLink": s.link(&format!("global/networks/{}", n.name)),
    })
}

async fn list_networks(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    read(&cloud, &p, |r, s| {
        let items = r
            .list::<Network>(NETWORKS)
            .iter()
            .filter(|n| !n.external)
            .map(|n| network_view(s, r, n))
            .collect();
        s.list_reply("compute#networkList", "global/networks", items, &q)
    })
}

async fn get_network(State(cloud): Ctx, Path(p): Params_) -> Reply {
    read(&cloud, &p, |r, s| {
        let name = param(&p, "name");
        let n = find_network(r, name)
            .ok_or_else(|| s.project.not_found(&format!("global/networks/{name}")))?;
        ok(network_view(s, r, &n))
    })
}
