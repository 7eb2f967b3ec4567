//! The routes of the GCE collections without an OpenStack counterpart: one set of paths
//! (`global/{collection}`, `regions/{region}/{collection}`), each call sent to the shared
//! handler of [`super::resource`] for the collection's type.

use super::resource::{self, which, Which};
use super::target_pools;
use super::*;
use crate::model::gce::address::AddressSpec;
use crate::model::gce::firewall::FirewallSpec;
use crate::model::gce::forwarding_rule::ForwardingRuleSpec;
use crate::model::gce::http_health_check::HttpHealthCheckSpec;
use crate::model::gce::route::RouteSpec;
use crate::model::gce::target_pool::TargetPoolSpec;

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    let g = format!("{p}/global/{{collection}}");
    let r = format!("{p}/regions/{{region}}/{{collection}}");
    Router::new()
        .route(&g, get(list).post(insert))
        .route(&format!("{g}/{{name}}"), get(get_one).delete(delete))
        .route(&r, get(list).post(insert))
        .route(&format!("{r}/{{name}}"), get(get_one).delete(delete))
        .route(
            &format!("{r}/{{name}}/{{action}}"),
            post(target_pools::action),
        )
}

async fn list(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    let (c, p, q) = (&cloud, &p, &q);
    match which(p) {
        Some(Which::Routes) => resource::list::<RouteSpec>(c, p, q),
        Some(Which::Firewalls) => resource::list::<FirewallSpec>(c, p, q),
        Some(Which::HttpHealthChecks) => resource::list::<HttpHealthCheckSpec>(c, p, q),
        Some(Which::Addresses) => resource::list::<AddressSpec>(c, p, q),
        Some(Which::TargetPools) => resource::list::<TargetPoolSpec>(c, p, q),
        Some(Which::ForwardingRules) => resource::list::<ForwardingRuleSpec>(c, p, q),
        None => resource::unknown(c, p.clone()).await,
    }
}

async fn get_one(State(cloud): Ctx, Path(p): Params_) -> Reply {
    let (c, p) = (&cloud, &p);
    match which(p) {
        Some(Which::Routes) => resource::get_one::<RouteSpec>(c, p),
        Some(Which::Firewalls) => resource::get_one::<FirewallSpec>(c, p),
        Some(Which::HttpHealthChecks) => resource::get_one::<HttpHealthCheckSpec>(c, p),
        Some(Which::Addresses) => resource::get_one::<AddressSpec>(c, p),
        Some(Which::TargetPools) => resource::get_one::<TargetPoolSpec>(c, p),
        Some(Which::ForwardingRules) => resource::get_one::<ForwardingRuleSpec>(c, p),
        None => resource::unknown(c, p.clone()).await,
    }
}

async fn insert(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    let b: Map<String, Value> = parse_body(&body)?;
    let c = &cloud;
    match which(&p) {
        Some(Which::Routes) => resource::insert::<RouteSpec>(c, p, b).await,
        Some(Which::Firewalls) => resource::insert::<FirewallSpec>(c, p, b).await,
        Some(Which::HttpHealthChecks) => resource::insert::<HttpHealthCheckSpec>(c, p, b).await,
        Some(Which::Addresses) => resource::insert::<AddressSpec>(c, p, b).await,
        Some(Which::TargetPools) => resource::insert::<TargetPoolSpec>(c, p, b).await,
        Some(Which::ForwardingRules) => resource::insert::<ForwardingRuleSpec>(c, p, b).await,
        None => resource::unknown(c, p).await,
    }
}

async fn delete(State(cloud): Ctx, Path(p): Params_) -> Reply {
    let c = &cloud;
    match which(&p) {
        Some(Which::Routes) => resource::delete::<RouteSpec>(c, p).await,
        Some(Which::Firewalls) => resource::delete::<FirewallSpec>(c, p).await,
        Some(Which::HttpHealthChecks) => resource::delete::<HttpHealthCheckSpec>(c, p).await,
        Some(Which::Addresses) => resource::delete::<AddressSpec>(c, p).await,
        Some(Which::TargetPools) => resource::delete::<TargetPoolSpec>(c, p).await,
        Some(Which::ForwardingRules) => resource::delete::<ForwardingRuleSpec>(c, p).await,
        None => resource::unknown(c, p).await,
    }
}
