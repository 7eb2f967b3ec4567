//! Operations: every change of the dialect goes through [`change`], which records its
//! Operation in the same transaction, so it is already `DONE` when answered; `operations.get`,
//! `wait`, `delete` and `list` read those records.

use super::*;
use crate::model::gce::operation::{Operation, OperationSpec};
use crate::model::gce::{Object, Spec};
use crate::model::Record;

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    let ops = |scope: &str| {
        Router::new()
            .route(&format!("{p}/{scope}/operations"), get(list_operations))
            .route(
                &format!("{p}/{scope}/operations/{{name}}"),
                get(get_operation).delete(delete_operation),
            )
            .route(
                &format!("{p}/{scope}/operations/{{name}}/wait"),
                post(get_operation),
            )
    };
    Router::new()
        .merge(ops("zones/{zone}"))
        .merge(ops("regions/{region}"))
        .merge(ops("global"))
}

/// What a change did, as its Operation records it.
pub(crate) struct Done {
    /// `zones/z`, `regions/r` or `global`.
    pub scope: String,
    /// `insert`, `delete`, `stop`, `setMetadata`, ...
    pub op_type: String,
    /// The target's path under the project (`zones/z/instances/n`; empty: the project).
    pub target: String,
    pub target_id: u64,
}

impl Done {
    /// The change `op_type` of the resource `name` of `collection` in `scope`.
    pub fn of(
        scope: String,
        op_type: impl Into<String>,
        collection: &str,
        name: &str,
        target_id: u64,
    ) -> Done {
        Done {
            target: format!("{scope}/{collection}/{name}"),
            scope,
            op_type: op_type.into(),
            target_id,
        }
    }
}

/// Where a zonal change is: the path's zone (checked) and name (empty when it has none).
pub(crate) struct Zonal<'a> {
    pub zone: &'a str,
    pub name: &'a str,
}

impl Zonal<'_> {
    /// The change `op_type` of the resource `name` of the zonal `collection`.
    pub fn done(&self, op_type: impl Into<String>, collection: &str, name: &str, id: u64) -> Done {
        Done::of(
            format!("zones/{}", self.zone),
            op_type,
            collection,
            name,
            id,
        )
    }
}

/// Every change of the dialect (insert, delete, stop, setMetadata, addInstance, ...) is made
/// here: `change` runs in one write transaction with the request's project and says what it
/// did; its Operation is recorded in the same transaction, so it is already `DONE` when
/// answered, and the answer is that Operation, as Compute Engine answers a change.
pub(crate) async fn change<F>(
    cloud: &Arc<Cloud>,
    project: String,
    change: F,
) -> Result<Response, ApiError>
where
    F: FnOnce(&mut Tx<'_>, &Scope<'_>) -> Result<Done, ApiError> + Send + 'static,
{
    let cloud2 = cloud.clone();
    let (project, op) = cloud
        .write(move |tx| {
            let project = Project::find(tx, &project)?;
            let s = Scope {
                cloud: &cloud2,
                project: &project,
            };
            let done = change(tx, &s)?;
            let op = record_operation(tx, &s, done)?;
            Ok((project, op))
        })
        .await?;
    Ok(operation_reply(
        &Scope {
            cloud,
            project: &project,
        },
        &op,
    ))
}

/// [`change`] for a path under `zones/{zone}`: the zone is checked after the project, and
/// `change` gets it with the path's `name`.
pub(crate) async fn change_zonal<F>(
    cloud: &Arc<Cloud>,
    p: BTreeMap<String, String>,
    change_in_zone: F,
) -> Result<Response, ApiError>
where
    F: FnOnce(&mut Tx<'_>, &Scope<'_>, &Zonal<'_>) -> Result<Done, ApiError> + Send + 'static,
{
    change(cloud, param(&p, "project").to_owned(), move |tx, s| {
        let zone = param(&p, "zone");
        check_zone(tx, s.project, zone)?;
        let at = Zonal {
            zone,
            name: param(&p, "name"),
        };
        change_in_zone(tx, s, &at)
    })
    .await
}

/// Records a finished operation (the change it describes is in the same transaction).
fn record_operation(tx: &mut Tx<'_>, s: &Scope<'_>, done: Done) -> Result<Operation, ApiError> {
    let meta = Meta::new(s.project.id.clone());
    let name = format!(
        "operation-{}-{}",
        m::parse_iso(&meta.created_at).unwrap_or(0) * 1000,
        &meta.id.replace('-', "")[..20]
    );
    let (_, user) = user_of(s.cloud, tx);
    let t = m::timestamp(&meta.created_at);
    let op = Operation {
        meta,
        name,
        scope: done.scope,
        spec: OperationSpec {
            operation_type: done.op_type,
            target_link: s.link(&done.target).trim_end_matches('/').to_owned(),
            target_id: done.target_id.to_string(),
            status: "DONE".into(),
            user,
            progress: 100,
            insert_time: t.clone(),
            start_time: t.clone(),
            end_time: t,
        },
    };
    op.put(tx)?;
    Ok(op)
}

/// Shows a stored GCE resource: its fields plus `kind`, `id`, `name`, `creationTimestamp`,
/// `selfLink` and its `zone`/`region` link.
pub(crate) fn object_view<S: Spec>(s: &Scope<'_>, o: &Object<S>) -> Value {
    let mut fields = o.fields();
    S::shown(&mut fields);
    let mut v = Value::Object(fields);
    v["kind"] = json!(S::KIND);
    v["id"] = json!(m::numeric_id(&o.meta.id).to_string());
    v["name"] = json!(o.name);
    v["creationTimestamp"] = json!(m::timestamp(&o.meta.created_at));
    v["selfLink"] = json!(s.link(&format!("{}/{}/{}", o.scope, S::COLLECTION, o.name)));
    if let Some(zone) = o.scope.strip_prefix("zones/") {
        v["zone"] = json!(s.link(&format!("zones/{zone}")));
    } else if let Some(region) = o.scope.strip_prefix("regions/") {
        v["region"] = json!(s.link(&format!("regions/{region}")));
    }
    v
}

fn operation_reply(s: &Scope<'_>, op: &Operation) -> Response {
    reply(StatusCode::OK, object_view(s, op))
}

/// `scope` of an operations route: `zones/z`, `regions/r` or `global`.
fn op_scope(
    s: &Scope<'_>,
    r: &impl Read,
    p: &BTreeMap<String, String>,
) -> Result<String, ApiError> {
    if let Some(zone) = p.get("zone") {
        check_zone(r, s.project, zone)?;
        Ok(format!("zones/{zone}"))
    } else if let Some(region) = p.get("region") {
        check_region(s.cloud, s.project, region)?;
        Ok(format!("regions/{region}"))
    } else {
        Ok("global".into())
    }
}

/// The operation a path names.
fn find_operation(
    s: &Scope<'_>,
    r: &impl Read,
    p: &BTreeMap<String, String>,
) -> Result<Operation, ApiError> {
    let scope = op_scope(s, r, p)?;
    let name = param(p, "name");
    Operation::get_in(r, &s.project.id, &scope, name)
        .ok_or_else(|| s.project.not_found(&format!("{scope}/operations/{name}")))
}

async fn get_operation(State(cloud): Ctx, Path(p): Params_) -> Reply {
    read(&cloud, &p, |r, s| {
        let op = find_operation(s, r, &p)?;
        Ok(operation_reply(s, &op))
    })
}

async fn delete_operation(State(cloud): Ctx, Path(p): Params_) -> Reply {
    let cloud2 = cloud.clone();
    cloud
        .write(move |tx| {
            let project = Project::find(tx, param(&p, "project"))?;
            let s = Scope {
                cloud: &cloud2,
                project: &project,
            };
            find_operation(&s, tx, &p)?.remove(tx);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn list_operations(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    read(&cloud, &p, |r, s| {
        let scope = op_scope(s, r, &p)?;
        let items = Operation::list_in(r, &s.project.id)
            .iter()
            .filter(|o| o.scope == scope)
            .map(|o| object_view(s, o))
            .collect();
        s.list_reply(
            "compute#operationList",
            &format!("{scope}/operations"),
            items,
            &q,
        )
    })
}
