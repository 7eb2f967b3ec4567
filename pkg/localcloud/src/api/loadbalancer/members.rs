//! `/pools/{id}/members`: backends of a pool, one at a time or the whole list at once
//! (`PUT`, the batch update the OpenStack CCM uses).

use axum::body::Bytes;
use axum::extract::OriginalUri;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Extension;
use serde_json::Value;

use super::body::{invalid, Body};
use super::{conflict, find, lock_lb, one, put, ApiResult};
use crate::api::{parse_body, ApiError, Caller, Ctx, Params};
use crate::model::octavia::{self as m, Common, Member, Pool, Record, MEMBERS};
use crate::store::{Read, Tx};

pub(super) const FIELDS: &[&str] = &[
    "name",
    "admin_state_up",
    "tags",
    "address",
    "protocol_port",
    "weight",
    "subnet_id",
    "monitor_address",
    "monitor_port",
    "backup",
    "project_id",
    "tenant_id",
    "id",
];

/// The member `id` of pool `pool_id` (404 when it is another pool's).
fn find_in(r: &impl Read, pool_id: &str, id: &str) -> Result<Member, ApiError> {
    let member: Member = find(r, id)?;
    if member.pool_id != pool_id {
        return Err(Member::not_found("").into());
    }
    Ok(member)
}

pub(super) async fn list(
    State(cloud): Ctx,
    Path(pool_id): Path<String>,
    Query(params): Query<Params>,
    OriginalUri(uri): OriginalUri,
) -> ApiResult {
    cloud.store.read(|r| find::<Pool>(r, &pool_id))?;
    super::list(
        &cloud,
        &params,
        &uri,
        &[("pool_id", &pool_id)],
        |member: &Member| member.pool_id == pool_id,
    )
}

pub(super) async fn get(
    State(cloud): Ctx,
    Path((pool_id, id)): Path<(String, String)>,
) -> ApiResult {
    cloud.store.read(|r| {
        find::<Pool>(r, &pool_id)?;
        let member = find_in(r, &pool_id, &id)?;
        Ok(one(r, StatusCode::OK, &member))
    })
}

/// The settings a create or update may change besides the common ones.
fn apply_settings(b: &Body, member: &mut Member) -> Result<(), ApiError> {
    if let Some(w) = b.opt_int("weight", 0, 256)? {
        member.weight = u16::try_from(w).unwrap_or(1);
    }
    if let Some(backup) = b.opt_bool("backup")? {
        member.backup = backup;
    }
    if b.has("monitor_address") {
        member.monitor_address = b.opt_ip("monitor_address")?.map(|a| a.to_string());
    }
    if b.has("monitor_port") {
        member.monitor_port = b.opt_port("monitor_port")?;
    }
    b.apply_common(&mut member.common)
}

/// A member's `subnet_id`: one that exists, as Octavia checks it (404 otherwise).
fn member_subnet(tx: &Tx<'_>, b: &Body) -> Result<Option<String>, ApiError> {
    let subnet = b.opt_str("subnet_id")?;
    if let Some(id) = &subnet {
        if tx
            .get::<crate::api::network::Subnet>(crate::api::network::SUBNETS, id)
            .is_none()
        {
            return Err(ApiError::not_found(
                "NotFound",
                format!("Subnet {id} not found."),
            ));
        }
    }
    Ok(subnet)
}

/// A new member of `pool_id` from a create body (validated).
pub(super) fn new_member(
    tx: &Tx<'_>,
    caller: &Caller,
    pool_id: &str,
    b: &Body,
) -> Result<Member, ApiError> {
    let address = b.req_ip("address")?.to_string();
    let port = b.req_port("protocol_port")?;
    if m::members_of(tx, pool_id)
        .iter()
        .any(|o| o.address == address && o.protocol_port == port)
    {
        return Err(conflict(format!(
            "Another member on this pool is already using ip {address} on protocol_port {port}"
        )));
    }
    let monitored = !m::monitors_of(tx, pool_id).is_empty();
    let mut common = Common::new(&caller.project_id);
    common.operating_status = if monitored {
        m::Operating::Offline
    } else {
        m::Operating::NoMonitor
    };
    let mut member = Member {
        common,
        pool_id: pool_id.to_owned(),
        address,
        protocol_port: port,
        weight: 1,
        backup: false,
        subnet_id: member_subnet(tx, b)?,
        monitor_address: None,
        monitor_port: None,
    };
    apply_settings(b, &mut member)?;
    Ok(member)
}

pub(super) async fn create(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(pool_id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let b = Body::parse(&body, "member", FIELDS)?;
    cloud
        .write(move |tx| {
            let p: Pool = find(tx, &pool_id)?;
            let member = new_member(tx, &caller, &pool_id, &b)?;
            lock_lb(tx, p.lb_id())?;
            put(tx, &member)?;
            Ok(one(tx, StatusCode::CREATED, &member))
        })
        .await
}

pub(super) async fn update(
    State(cloud): Ctx,
    Path((pool_id, id)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    let b = Body::parse(&body, "member", FIELDS)?;
    cloud
        .write(move |tx| {
            let p: Pool = find(tx, &pool_id)?;
            let mut member = find_in(tx, &pool_id, &id)?;
            b.immutable(&member, &["address", "protocol_port", "subnet_id"])?;
            lock_lb(tx, p.lb_id())?;
            apply_settings(&b, &mut member)?;
            member.common.touch();
            put(tx, &member)?;
            Ok(one(tx, StatusCode::OK, &member))
        })
        .await
}

/// `PUT /pools/{id}/members`: the pool's members become exactly the given list (matched by
/// address and port), as the OpenStack CCM uses it.
pub(super) async fn batch_update(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(pool_id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let v: Value = parse_body(&body)?;
    let Some(items) = v["members"].as_array().cloned() else {
        return Err(invalid("members. Value: missing"));
    };
    let mut wanted = Vec::new();
    for item in items {
        let Value::Object(o) = item else {
            return Err(invalid("members. Value should be a list of objects"));
        };
        wanted.push(Body::of(o, "members", FIELDS)?);
    }
    cloud
        .write(move |tx| {
            let p: Pool = find(tx, &pool_id)?;
            lock_lb(tx, p.lb_id())?;
            let existing = m::members_of(tx, &pool_id);
            let mut keep = Vec::new();
            for b in &wanted {
                let address = b.req_ip("address")?.to_string();
                let port = b.req_port("protocol_port")?;
                let member = match existing
                    .iter()
                    .find(|o| o.address == address && o.protocol_port == port)
                {
                    Some(o) => {
                        let mut member = o.clone();
                        apply_settings(b, &mut member)?;
                        member.common.touch();
                        member
                    }
                    None => new_member(tx, &caller, &pool_id, b)?,
                };
                keep.push(member.id().to_owned());
                put(tx, &member)?;
            }
            for o in existing {
                if !keep.iter().any(|k| k == o.id()) {
                    tx.delete(MEMBERS, o.id());
                }
            }
            Ok(())
        })
        .await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

pub(super) async fn delete(
    State(cloud): Ctx,
    Path((pool_id, id)): Path<(String, String)>,
) -> ApiResult {
    cloud
        .write(move |tx| {
            let p: Pool = find(tx, &pool_id)?;
            find_in(tx, &pool_id, &id)?;
            lock_lb(tx, p.lb_id())?;
            tx.delete(MEMBERS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
