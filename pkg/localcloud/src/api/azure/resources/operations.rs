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
    record_operation(tx, call, kind, response, with_location, None)
}

/// Whether this change is one `--inject-operation-failure-rate` makes fail.
pub(super) fn fails(call: &Call, kind: Kind) -> bool {
    kind.long_running()
        && call
            .cloud
            .faults
            .fails_operation(crate::http::Service::Azure)
}

/// The answer to a change that the `--inject-operation-failure-rate` fault makes fail: it is
/// accepted as usual (a PUT with the resource `Creating` or `Updating`), nothing changes, and
/// polling the operation reports `Failed` with ARM's error.
pub(super) async fn failed_change(
    call: Arc<Call>,
    kind: Kind,
    key: String,
    id: String,
) -> Result<Response, ApiError> {
    let cloud = call.cloud.clone();
    cloud
        .write(move |tx| {
            let existing = ArmResource::get(tx, &key);
            let mut response = match call.method {
                Method::PUT | Method::PATCH => {
                    let state = if existing.is_some() { "Updating" } else { "Creating" };
                    let name = id.rsplit('/').next().unwrap_or_default().to_owned();
                    let status = if existing.is_some() || call.method == Method::PATCH {
                        StatusCode::OK
                    } else {
                        StatusCode::CREATED
                    };
                    reply(
                        status,
                        json!({"id": id, "name": name, "type": kind.ty(), "properties": {"provisioningState": state}}),
                    )
                }
                _ if existing.is_none() && call.method == Method::DELETE => {
                    return Ok(StatusCode::NO_CONTENT.into_response())
                }
                _ => StatusCode::ACCEPTED.into_response(),
            };
            let error = (
                "InternalServerError".to_owned(),
                "The operation failed (injected by --inject-operation-failure-rate); nothing was changed."
                    .to_owned(),
            );
            let with_location = call.method != Method::PUT && call.method != Method::PATCH;
            record_operation(tx, &call, kind, &mut response, with_location, Some(error))?;
            Ok(response)
        })
        .await
}

fn record_operation(
    tx: &mut Tx<'_>,
    call: &Call,
    kind: Kind,
    response: &mut Response,
    with_location: bool,
    error: Option<(String, String)>,
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
        status: if error.is_some() {
            "Failed"
        } else {
            "Succeeded"
        }
        .into(),
        error,
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
