//! The project (`projects.get`) and its `commonInstanceMetadata`
//! (`projects.setCommonInstanceMetadata`).

use super::body::{check_fingerprint, parse_metadata};
use super::operations::{change, Done};
use super::*;
use crate::model::gce::project_metadata::{common_metadata, ProjectMetadata};
use crate::model::Record;

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    Router::new().route(p, get(get_project)).route(
        &format!("{p}/setCommonInstanceMetadata"),
        post(set_common_metadata),
    )
}

async fn get_project(State(cloud): Ctx, Path(p): Params_) -> Reply {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let s = Scope { cloud: &cloud, project: &project };
        Ok(reply(
            StatusCode::OK,
            json!({
                "kind": "compute#project", "id": project.numeric_id().to_string(), "name": project.name,
                "creationTimestamp": m::timestamp("2013-07-23T11:33:21Z"),
                "commonInstanceMetadata": m::metadata_view(&common_metadata(r, &project.id)),
                "quotas": [], "selfLink": s.link("").trim_end_matches('/'),
                "defaultServiceAccount": format!("{}-compute@developer.gserviceaccount.com", project.numeric_id()),
                "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS", "defaultNetworkTier": "PREMIUM",
            }),
        ))
    })
}

async fn set_common_metadata(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    let b: Value = parse_body(&body)?;
    let (items, fp) = parse_metadata(&b, "metadata")?;
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let current = common_metadata(tx, &s.project.id);
        check_fingerprint(fp.as_deref(), &m::fingerprint(&json!(current)), "metadata")?;
        ProjectMetadata::set(tx, &s.project.id, items).put(tx)?;
        Ok(Done {
            scope: "global".into(),
            op_type: "compute.projects.setCommonInstanceMetadata".into(),
            target: String::new(),
            target_id: s.project.numeric_id(),
        })
    })
    .await
}
