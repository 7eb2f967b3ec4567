//! What the OpenStack services' list/show/update/delete handlers share over [`Record`]: a
//! record's view ([`View`]), the candidates the store's index gives a list's filters
//! ([`candidates`]) and the generic DELETE ([`delete`], with each kind's [`Release`]). Each service keeps only its own view,
//! filters, order and checks. Upstream equivalent: `neutron.api.v2.base.Controller`, which every
//! Neutron resource (and Octavia's `BaseController`) is served through.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{ApiError, Cloud, Params};
use crate::model::Record;
use crate::store::{Read, Tx};

/// How a record is shown: its stored attributes plus what is computed from related records.
pub(crate) trait View: Record {
    fn view(&self, r: &impl Read) -> Value;
}

/// The record stored under `id`, or the kind's 404.
pub(crate) fn find<R: Record>(r: &impl Read, id: &str) -> Result<R, ApiError> {
    Ok(R::find(r, id)?)
}

/// The IDs the indexed filters of `params` (and `extra` field/value pairs) allow: a key given
/// twice allows either value, different keys must all match; `None` when no filter is indexed.
pub(crate) fn candidates<R: Record>(
    r: &impl Read,
    params: &Params,
    extra: &[(&str, &str)],
) -> Option<BTreeSet<String>> {
    let mut by_key: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let indexed = params
        .0
        .iter()
        .filter(|(k, _)| R::INDEXED.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()));
    for (k, v) in indexed.chain(extra.iter().copied()) {
        by_key
            .entry(k)
            .or_default()
            .extend(r.ids_where(R::TABLE, k, v));
    }
    by_key
        .into_values()
        .reduce(|a, b| a.intersection(&b).cloned().collect())
}

/// The records a list starts from: the index's [`candidates`], or every record of the kind.
pub(crate) fn listed<R: Record>(r: &impl Read, params: &Params, extra: &[(&str, &str)]) -> Vec<R> {
    match candidates::<R>(r, params, extra) {
        Some(ids) => ids.iter().filter_map(|id| R::get(r, id)).collect(),
        None => R::list(r),
    }
}

/// What deleting a record of its kind also does: refuse while it is in use, remove what belongs
/// to it. The generic [`delete`] does the rest.
pub(crate) trait Release: Record + Send + 'static {
    fn release(&self, _: &mut Tx<'_>) -> Result<(), ApiError> {
        Ok(())
    }
}

/// The generic DELETE: 404 unless record `id` exists, then [`Release::release`], then the
/// record itself; 204.
pub(crate) async fn delete<R: Release>(
    State(cloud): State<Arc<Cloud>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    cloud
        .write(move |tx| {
            let record = find::<R>(tx, &id)?;
            record.release(tx)?;
            R::delete(tx, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
