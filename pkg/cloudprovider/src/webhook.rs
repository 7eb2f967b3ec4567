//! Admission webhooks a provider serves from the cloud-controller-manager (upstream
//! k8s.io/cloud-provider `app.WebhookConfig`, the map a provider's `main` hands to
//! `NewCloudControllerManagerCommand`). The provider says which webhooks it has and answers
//! their AdmissionReviews; the cloud-controller-manager decides which run (`--webhooks`),
//! serves them on `--webhook-secure-port` and routes each request by path. The one every
//! provider with load balancers has is in [`crate::lb_webhook`].

use async_trait::async_trait;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;

use crate::Result;

/// One webhook of a provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebhookSpec {
    /// The name `--webhooks` enables (`foo`) or disables (`-foo`).
    pub name: &'static str,
    /// The HTTPS path the apiserver's webhook configuration points at (`/validate/...`).
    pub path: &'static str,
    /// Off unless named in `--webhooks` (upstream `WebhooksDisabledByDefault`); `*` turns on
    /// the others.
    pub disabled_by_default: bool,
}

/// A provider's admission webhooks (see [`crate::Interface::webhooks`]).
#[async_trait]
pub trait Webhooks: Send + Sync {
    /// Every webhook the provider has, enabled by default or not. Names and paths are unique.
    fn webhooks(&self) -> Vec<WebhookSpec>;

    /// Answers one AdmissionReview request for the webhook named `webhook` (one of
    /// [`Webhooks::webhooks`]). An `Err` is answered HTTP 500 (the apiserver then applies the
    /// webhook configuration's `failurePolicy`), as upstream's handler does; a refusal is an
    /// `Ok` response with `allowed: false`.
    async fn admit(
        &self,
        webhook: &str,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse>;
}
