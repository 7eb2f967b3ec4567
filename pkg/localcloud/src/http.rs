//! What every HTTP service of the local cloud shares below its handlers: which service answers
//! ([`Service`], which decides the error format) and the error a handler returns ([`ApiError`]),
//! with the mapping of the crate's and the model's errors onto it. The fault injector and the
//! metadata servers use it as the API does.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Which service answers a request; it decides the error body format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    Identity,
    Compute,
    Network,
    Volume,
    Image,
    LoadBalancer,
    Metadata,
    /// Compute Engine v1 (the GCE dialect, `/compute/v1`).
    Gce,
    /// Azure Resource Manager and Microsoft Entra (the Azure dialect, `/subscriptions`,
    /// `/{tenant}/oauth2/v2.0/token`).
    Azure,
    /// The Mesos master's state endpoint (the Mesos dialect, `/state`, `/master/state`).
    Mesos,
    /// The oVirt engine's REST API (the oVirt dialect, `/api`, `/ovirt-engine`).
    Ovirt,
    /// Photon Controller's REST API and its Lightwave token endpoint (the Photon dialect,
    /// `/v1`, `/openidconnect`).
    Photon,
    /// Apache CloudStack's query API (the CloudStack dialect, `/client/api`).
    CloudStack,
}

impl Service {
    /// The name used in flags (`--inject-error-rate compute=0.5`).
    pub fn name(self) -> &'static str {
        match self {
            Service::Identity => "identity",
            Service::Compute => "compute",
            Service::Network => "network",
            Service::Volume => "volume",
            Service::Image => "image",
            Service::LoadBalancer => "load-balancer",
            Service::Metadata => "metadata",
            Service::Gce => "gce",
            Service::Azure => "azure",
            Service::Mesos => "mesos",
            Service::Ovirt => "ovirt",
            Service::Photon => "photon",
            Service::CloudStack => "cloudstack",
        }
    }

    /// Every service, for flag parsing.
    pub const ALL: [Service; 13] = [
        Service::Identity,
        Service::Compute,
        Service::Network,
        Service::Volume,
        Service::Image,
        Service::LoadBalancer,
        Service::Metadata,
        Service::Gce,
        Service::Azure,
        Service::Mesos,
        Service::Ovirt,
        Service::Photon,
        Service::CloudStack,
    ];
}

/// Marks a response whose error body is final (`api::format_errors` leaves it as it is).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Formatted;

/// An API error; `api::format_errors` renders it in the service's format.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    /// Neutron's error type (`NetworkNotFound`); other services ignore it.
    pub kind: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
        }
    }
    /// The same error with another type (Neutron's `InvalidInput`, ARM's
    /// `InvalidResourceGroupName`).
    pub fn with_kind(mut self, kind: &'static str) -> Self {
        self.kind = kind;
        self
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "HTTPBadRequest", message)
    }
    pub fn not_found(kind: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, kind, message)
    }
    pub fn conflict(kind: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, kind, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "The request you have made requires authentication.",
        )
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "HTTPInternalServerError",
            message,
        )
    }
}

impl From<crate::Error> for ApiError {
    fn from(e: crate::Error) -> Self {
        let chain = hypercloud_cloudprovider::Chain(&e).to_string();
        tracing::error!(error = %chain, "local-cloud internal error");
        ApiError::internal(chain)
    }
}

impl From<crate::model::NotFound> for ApiError {
    fn from(e: crate::model::NotFound) -> Self {
        ApiError::not_found(e.kind, e.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        response.extensions_mut().insert(self);
        response
    }
}
