//! Long-running operations: the headers a change answers with, and the polls (see [`super`]).

use super::*;

/// An operation's status (`.../operations/{id}`, what `Azure-AsyncOperation` names) or its
/// result (`.../operationResults/{id}`, what `Location` names).
pub(super) fn operation(call: &Call, what: &str, id: &str) -> Result<Response, ApiError> {
    let op = call
        .cloud
        .store
        .read(|v| Operation::get(v, id))
        .filter(|o| o.meta.project_id == call.caller.project_id)
        .ok_or_else(|| {
            ApiError::not_found(
                "OperationNotFound",
                format!("The operation '{id}' could not be found."),
            )
        })?;
    let started = crate::api::iso(op.started);
    if what.eq_ignore_ascii_case("operations") {
        let mut v = json!({
            "name": op.id(), "status": op.status, "startTime": started, "endTime": started,
        });
        if let Some((code, message)) = &op.error {
            v["error"] = json!({"code": code, "message": message});
        }
        return Ok(reply(StatusCode::OK, v));
    }
    if !what.eq_ignore_ascii_case("operationResults") {
        return Err(no_route(what));
    }
    match (op.status.as_str(), &op.error) {
        ("Succeeded", _) => Ok(StatusCode::NO_CONTENT.into_response()),
        (_, Some((code, message))) => Ok(reply(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": code, "message": message}}),
        )),
        (status, None) => Ok(reply(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": status, "message": format!("The operation ended {status}.")}}),
        )),
    }
}

/// Records a finished operation of the caller and adds the headers to poll it by.
pub(super) fn long_running(
    tx: &mut Tx<'_>,
    call: &Call,
    kind: Kind,
    response: &mut Response,
    with_location: bool,
) -> Result<(), ApiError> {
    let s = scope(&call.cloud, &call.caller);
    let version = api_version(&call.query);
    let now = crate::api::now();
    for old in Operation::list(tx)
        .into_iter()
        .filter(|o| o.started + 3600 < now)
    {
        Operation::delete(tx, old.id());
    }
    let op = Operation {
        meta: Meta::new(s.project_id),
        status: "Succeeded".into(),
        error: None,
        started: now,
    };
    op.put(tx)?;
    let base = format!(
        "{}/subscriptions/{}/providers/{}/locations/{}",
        call.cloud.base_url,
        s.subscription,
        kind.namespace(),
        s.location
    );
    let h = response.headers_mut();
    let mut set = |name: &'static str, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    };
    set(
        "azure-asyncoperation",
        format!("{base}/operations/{}?api-version={version}", op.id()),
    );
    if with_location {
        set(
            "location",
            format!("{base}/operationResults/{}?api-version={version}", op.id()),
        );
    }
    // Retry-After 0 (or none) would make Microsoft's clients wait 30 s between polls.
    set("retry-after", "1".into());
    Ok(())
}
