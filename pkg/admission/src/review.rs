//! AdmissionReview in and out: decoding (400 on malformed input), and the one place a
//! check's [`Verdict`] becomes an AdmissionResponse.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hypercloud_cloudprovider::throttle::{WarnLimiter, WARN_INTERVAL};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::DynamicObject;

/// What a check decided.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Allowed unchanged.
    Allow,
    /// Allowed with a warning shown to the client.
    AllowWithWarning(String),
    /// Allowed with these JSON-patch operations applied (mutating webhooks).
    Patch(json_patch::Patch),
    /// Denied with this message.
    Deny(String),
}

/// The whole exchange of one check: decode the review (400 if malformed), decide, answer.
pub async fn answer(
    body: &Bytes,
    check_name: &str,
    check: impl AsyncFnOnce(&AdmissionRequest<DynamicObject>) -> Verdict,
) -> Response {
    match decode(body) {
        Ok(req) => {
            let verdict = check(&req).await;
            respond(&req, check_name, verdict)
        }
        Err(message) => bad_request(message),
    }
}

/// The only `apiVersion` served (the webhook configurations ask for `admissionReviewVersions:
/// ["v1"]`, and the answer is always v1).
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The `kind` of the exchange.
pub const KIND: &str = "AdmissionReview";

/// Decodes the body; `Err` says what is wrong, for [`bad_request`]. A review of another
/// `apiVersion` or `kind` is refused rather than answered as if it were one.
pub fn decode(body: &Bytes) -> Result<AdmissionRequest<DynamicObject>, String> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(|e| format!("malformed AdmissionReview: {e}"))?;
    if review.types.api_version != API_VERSION {
        return Err(format!(
            "apiVersion: {:?} is not supported; use {API_VERSION:?}",
            review.types.api_version
        ));
    }
    if review.types.kind != KIND {
        return Err(format!("kind: {:?} is not {KIND:?}", review.types.kind));
    }
    review
        .try_into()
        .map_err(|e: kube::core::admission::ConvertAdmissionReviewError| {
            format!("AdmissionReview without a request: {e}")
        })
}

/// Whoever can reach the webhook can send malformed reviews at will: their warnings are
/// rate-limited.
static BAD_REQUEST_WARNINGS: WarnLimiter = WarnLimiter::new(WARN_INTERVAL);

/// The 400 answer to an undecodable review.
pub fn bad_request(message: String) -> Response {
    if let Some(suppressed) = BAD_REQUEST_WARNINGS.allow() {
        tracing::warn!(%message, suppressed, "rejecting webhook call");
    }
    (StatusCode::BAD_REQUEST, message).into_response()
}

/// The AdmissionReview answering `req` with `verdict`.
pub fn respond(req: &AdmissionRequest<DynamicObject>, check: &str, verdict: Verdict) -> Response {
    let base = AdmissionResponse::from(req);
    let name = req.name.as_str();
    let response = match verdict {
        Verdict::Allow => base,
        Verdict::AllowWithWarning(w) => {
            let mut r = base;
            r.warnings = Some(vec![w]);
            r
        }
        Verdict::Patch(p) => match base.clone().with_patch(p) {
            Ok(r) => r,
            Err(e) => base.deny(format!("{check}: building the patch: {e}")),
        },
        Verdict::Deny(message) => {
            tracing::info!(check, name, %message, "denied");
            base.deny(message)
        }
    };
    Json(response.into_review()).into_response()
}

/// Decodes the request's object as `K`.
pub fn object<K: serde::de::DeserializeOwned>(
    kind: &'static str,
    obj: &DynamicObject,
) -> crate::Result<K> {
    serde_json::to_value(obj)
        .and_then(serde_json::from_value)
        .map_err(|source| crate::Error::DecodeObject {
            kind,
            source: Box::new(source),
        })
}

/// The object of a CREATE of `kind` that `check` decides, decoded; `Err` holds the verdict on
/// any other request: another kind is allowed with a warning, another operation allowed, an
/// object that does not decode denied.
pub fn created<K: serde::de::DeserializeOwned>(
    check: &str,
    req: &AdmissionRequest<DynamicObject>,
    kind: &'static str,
) -> Result<K, Verdict> {
    if let Some(verdict) = other_kind(check, req, kind) {
        return Err(verdict);
    }
    let (kube::core::admission::Operation::Create, Some(obj)) = (&req.operation, &req.object)
    else {
        return Err(Verdict::Allow);
    };
    object(kind, obj)
        .map_err(|e| Verdict::Deny(format!("{check}: {}", hypercloud_cloudprovider::Chain(&e))))
}

/// The verdict on a request about another kind than the `kind` that `check` handles: allowed,
/// with a warning saying so; `None` for a request about `kind`.
pub fn other_kind(
    check: &str,
    req: &AdmissionRequest<DynamicObject>,
    kind: &str,
) -> Option<Verdict> {
    (req.kind.kind != kind).then(|| {
        Verdict::AllowWithWarning(format!(
            "{check}: {} objects are not handled",
            req.kind.kind
        ))
    })
}
