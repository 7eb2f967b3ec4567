//! The routes of the GCE collections without an OpenStack counterpart: one set of paths
//! (`global/{collection}`, `regions/{region}/{collection}`, and `zones/{zone}/instanceGroups`
//! beside the zonal collections with routes of their own), each call sent to the shared
//! handler of [`super::resource`] for the collection's type.

use super::resource::{self, which, Which};
use super::*;
use super::{instance_groups, target_pools};
use crate::model::gce::address::AddressSpec;
use crate::model::gce::backend_service::BackendServiceSpec;
use crate::model::gce::firewall::FirewallSpec;
use crate::model::gce::forwarding_rule::ForwardingRuleSpec;
use crate::model::gce::health_check::HealthCheckSpec;
use crate::model::gce::http_health_check::HttpHealthCheckSpec;
use crate::model::gce::instance_group::InstanceGroupSpec;
use crate::model::gce::route::RouteSpec;
use crate::model::gce::target_pool::TargetPoolSpec;
use crate::model::gce::Spec;

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    let g = format!("{p}/global/{{collection}}");
    let r = format!("{p}/regions/{{region}}/{{collection}}");
    let z = format!("{p}/zones/{{zone}}/{}", InstanceGroupSpec::COLLECTION);
    let one = || get(get_one).delete(delete).put(put).patch(patch);
    Router::new()
        .route(&g, get(list).post(insert))
        .route(&format!("{g}/{{name}}"), one())
        .route(&r, get(list).post(insert))
        .route(&format!("{r}/{{name}}"), one())
        .route(
            &format!("{r}/{{name}}/{{action}}"),
            post(target_pools::action),
        )
        .route(&z, get(zonal_list).post(zonal_insert))
        .route(
            &format!("{z}/{{name}}"),
            get(zonal_get).delete(zonal_delete),
        )
        .route(
            &format!("{z}/{{name}}/{{action}}"),
            post(instance_groups::action),
        )
}

/// The path parameters of a zonal instance group route, with the collection named.
fn zonal(mut p: BTreeMap<String, String>) -> BTreeMap<String, String> {
    p.insert("collection".into(), InstanceGroupSpec::COLLECTION.into());
    p
}

async fn zonal_list(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    resource::list::<InstanceGroupSpec>(&cloud, &zonal(p), &q)
}

async fn zonal_get(State(cloud): Ctx, Path(p): Params_) -> Reply {
    resource::get_one::<InstanceGroupSpec>(&cloud, &zonal(p))
}

async fn zonal_insert(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    let b: Map<String, Value> = parse_body(&body)?;
    resource::insert::<InstanceGroupSpec>(&cloud, zonal(p), b).await
}

async fn zonal_delete(State(cloud): Ctx, Path(p): Params_) -> Reply {
    resource::delete::<InstanceGroupSpec>(&cloud, zonal(p)).await
}

async fn put(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    update(cloud, p, body, false).await
}

async fn patch(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    update(cloud, p, body, true).await
}

async fn update(cloud: Arc<Cloud>, p: BTreeMap<String, String>, body: Bytes, merge: bool) -> Reply {
    let b: Map<String, Value> = parse_body(&body)?;
    let c = &cloud;
    match which(&p) {
        Some(Which::Routes) => resource::update::<RouteSpec>(c, p, b, merge).await,
        Some(Which::Firewalls) => resource::update::<FirewallSpec>(c, p, b, merge).await,
        Some(Which::HttpHealthChecks) => {
            resource::update::<HttpHealthCheckSpec>(c, p, b, merge).await
        }
        Some(Which::Addresses) => resource::update::<AddressSpec>(c, p, b, merge).await,
        Some(Which::TargetPools) => resource::update::<TargetPoolSpec>(c, p, b, merge).await,
        Some(Which::ForwardingRules) => {
            resource::update::<ForwardingRuleSpec>(c, p, b, merge).await
        }
        Some(Which::HealthChecks) => resource::update::<HealthCheckSpec>(c, p, b, merge).await,
        Some(Which::BackendServices) => {
            resource::update::<BackendServiceSpec>(c, p, b, merge).await
        }
        Some(Which::InstanceGroups) | None => resource::unknown(c, p).await,
    }
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
        Some(Which::HealthChecks) => resource::list::<HealthCheckSpec>(c, p, q),
        Some(Which::BackendServices) => resource::list::<BackendServiceSpec>(c, p, q),
        Some(Which::InstanceGroups) | None => resource::unknown(c, p.clone()).await,
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
        Some(Which::HealthChecks) => resource::get_one::<HealthCheckSpec>(c, p),
        Some(Which::BackendServices) => resource::get_one::<BackendServiceSpec>(c, p),
        Some(Which::InstanceGroups) | None => resource::unknown(c, p.clone()).await,
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
        Some(Which::HealthChecks) => resource::insert::<HealthCheckSpec>(c, p, b).await,
        Some(Which::BackendServices) => resource::insert::<BackendServiceSpec>(c, p, b).await,
        Some(Which::InstanceGroups) | None => resource::unknown(c, p).await,
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
        Some(Which::HealthChecks) => resource::delete::<HealthCheckSpec>(c, p).await,
        Some(Which::BackendServices) => resource::delete::<BackendServiceSpec>(c, p).await,
        Some(Which::InstanceGroups) | None => resource::unknown(c, p).await,
    }
}
