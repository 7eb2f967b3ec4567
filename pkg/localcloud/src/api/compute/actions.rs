//! Server actions (`POST /servers/{id}/action`): start, stop, reboot and the other actions Nova
//! takes on a server.

use super::*;

pub(super) async fn server_action(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: serde_json::Map<String, Value> = parse_body(&body)?;
    let Some((action, arg)) = b.into_iter().next() else {
        return Err(ApiError::bad_request(
            "Malformed request body: no action given",
        ));
    };
    cloud
        .write(move |tx| {
            let mut s = find_server(tx, &id)?;
            let conflict = |verb: &str, s: &Server| {
                let state = if s.status == SHUTOFF {
                    "stopped"
                } else {
                    "active"
                };
                ApiError::conflict(
                    "conflictingRequest",
                    format!(
                        "Cannot '{verb}' instance {} while it is in vm_state {state}",
                        s.meta.id
                    ),
                )
            };
            match action.as_str() {
                "os-stop" if s.status == ACTIVE => s.status = SHUTOFF.into(),
                "os-stop" => return Err(conflict("stop", &s)),
                "os-start" if s.status == SHUTOFF => s.status = ACTIVE.into(),
                "os-start" => return Err(conflict("start", &s)),
                "reboot" => {
                    let kind = arg["type"]
                        .as_str()
                        .unwrap_or_default()
                        .to_ascii_uppercase();
                    if kind != "SOFT" && kind != "HARD" {
                        return Err(ApiError::bad_request(
                            "Invalid input for field/attribute reboot: type must be SOFT or HARD",
                        ));
                    }
                    if kind == "SOFT" && s.status == SHUTOFF {
                        return Err(conflict("reboot", &s));
                    }
                    s.status = ACTIVE.into();
                }
                other => {
                    return Err(ApiError::bad_request(format!(
                        "There is no such action: {other}"
                    )))
                }
            }
            s.meta.touch();
            tx.put(SERVERS, &id, &s)?;
            Ok(())
        })
        .await?;
    Ok(StatusCode::ACCEPTED.into_response())
}
