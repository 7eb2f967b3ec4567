//! The kube-apiserver's cloud duties as an HTTPS admission webhook, for the
//! `apiserver-plugin` personality (upstream admission plugins `PersistentVolumeLabel`,
//! `PersistentVolumeClaimResize`, and the OpenStack rule that only cloud instances may
//! register as Nodes).
//!
//! [`router`] returns the webhook as an axum `Router` (so tests call it in process); each
//! check is a module: [`pv_label`] (mutating: zone/region labels and node affinity on PVs of
//! cloud volumes), [`node`] (validating: a Node may be created only if its instance exists),
//! [`pvc_resize`] (validating: growing a claim needs a StorageClass that allows expansion and
//! a volume type that supports it). A malformed AdmissionReview is answered 400; an object of
//! a kind a check does not handle is allowed with a warning, as upstream plugins ignore
//! kinds they do not handle.
//!
//! [`provider_webhooks`] is the cloud-controller-manager's server for the webhooks a provider
//! declares itself (upstream k8s.io/cloud-provider `app/webhooks.go`).
//!
//! Start here: [`router`] (one route per check), then one check, e.g. [`pv_label::check`], and
//! `src/review.rs` (decoding an AdmissionReview and answering it). The process around it (flags,
//! TLS, the server loop) is the `apiserver-plugin` personality, `cmd/hypercloud/src/apiserver_plugin.rs`.
//!
//! Not here: any cloud API (every check asks the provider through `hypercloud-cloudprovider`'s
//! traits), the webhook configurations (`deploy/apiserver-plugin/`), or controllers: the
//! external layout's PV labels are `hypercloud-controllers`' `pv_label`.

mod error;
pub mod node;
pub mod provider_webhooks;
pub mod pv_label;
pub mod pvc_resize;
mod review;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use hypercloud_cloudprovider::Interface;

pub use error::{Error, Result};
pub use review::Verdict;

/// Path of the PersistentVolumeLabel (mutating) webhook.
pub const PATH_PV_LABEL: &str = "/mutate/persistentvolumelabel";
/// Path of the cloud node (validating) webhook.
pub const PATH_NODE: &str = "/validate/cloudnode";
/// Path of the PVC resize (validating) webhook.
pub const PATH_PVC_RESIZE: &str = "/validate/pvcresize";

/// What the checks need.
#[derive(Clone)]
pub struct Webhook {
    /// The cloud (instances for node admission, PV labels).
    pub cloud: Arc<dyn Interface>,
    /// The API server (StorageClasses and PVs for PVC resize).
    pub client: kube::Client,
}

/// The webhook's HTTP routes.
pub fn router(webhook: Arc<Webhook>) -> Router {
    Router::new()
        .route(PATH_PV_LABEL, post(pv_label::handle))
        .route(PATH_NODE, post(node::handle))
        .route(PATH_PVC_RESIZE, post(pvc_resize::handle))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(webhook)
}
