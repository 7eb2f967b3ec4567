//! The managed identity credential (`useManagedIdentityExtension`): a token from the instance
//! metadata service, `GET {imds}/metadata/identity/oauth2/token?api-version=2018-02-01&resource=R`
//! with `Metadata: true` (and `client_id` for a user-assigned identity), as
//! docs/azure-clients.md (b) records Microsoft's clients doing. azure_identity 1.0's
//! `ManagedIdentityCredential` always asks `169.254.169.254`; this one asks the endpoint of
//! [`super::ArmOptions::imds_endpoint`] (`AZURE_POD_IDENTITY_AUTHORITY_HOST`, as Microsoft's
//! clients read it), so a test or the local cloud can stand in. Tokens are cached until five
//! minutes before they expire; 404, 410, 429 and 5xx are retried (IMDS answers them while a VM
//! boots), through the one retry policy.

use std::time::Duration;

use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
use azure_core::error::ErrorKind;
use azure_core::time::OffsetDateTime;
use hypercloud_cloudprovider::http_body::{self, excerpt, excerpt_str, METADATA_LIMIT};
use hypercloud_cloudprovider::retry::{Attempt, RetryPolicy};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::error::Error;

const API: &str = "the instance metadata service";

/// How IMDS is asked again after 404, 410, 429 or 5xx.
const IMDS_RETRY: RetryPolicy =
    RetryPolicy::new(5, Duration::from_millis(500), Duration::from_secs(8));

/// Tokens from IMDS.
#[derive(Debug)]
pub(crate) struct ImdsCredential {
    http: reqwest::Client,
    endpoint: String,
    client_id: Option<String>,
    cached: Mutex<Option<AccessToken>>,
}

impl ImdsCredential {
    /// Asks `endpoint` (`http://169.254.169.254`) for the system-assigned identity's tokens, or
    /// the user-assigned identity `client_id`'s.
    pub fn new(http: reqwest::Client, endpoint: &str, client_id: Option<String>) -> Self {
        ImdsCredential {
            http,
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            client_id,
            cached: Mutex::new(None),
        }
    }

    fn error(&self, message: String) -> azure_core::Error {
        let e = Error::ImdsToken {
            endpoint: self.endpoint.clone(),
            message,
        };
        azure_core::Error::with_error(ErrorKind::Credential, e, "ManagedIdentityCredential")
    }

    async fn fetch(&self, resource: &str) -> azure_core::Result<AccessToken> {
        let url = format!("{}/metadata/identity/oauth2/token", self.endpoint);
        let mut query = vec![("api-version", "2018-02-01"), ("resource", resource)];
        if let Some(id) = &self.client_id {
            query.push(("client_id", id));
        }
        let retried = IMDS_RETRY
            .run(
                |_| async {
                    let resp = match self
                        .http
                        .get(&url)
                        .query(&query)
                        .header("Metadata", "true")
                        .send()
                        .await
                    {
                        Ok(r) => r,
                        Err(e) => {
                            return Attempt::Again {
                                outcome: Err(hypercloud_cloudprovider::Chain(&e).to_string()),
                                retry_after: None,
                            }
                        }
                    };
                    let status = resp.status().as_u16();
                    if status != 200 {
                        let (prefix, _) = http_body::read_prefix(reqwest::Body::from(resp)).await;
                        let v: Value = serde_json::from_slice(&prefix).unwrap_or(Value::Null);
                        let said = v["error_description"]
                            .as_str()
                            .map_or_else(|| excerpt(&prefix), excerpt_str);
                        let outcome = Err(format!("HTTP {status}: {said}"));
                        return if matches!(status, 404 | 410 | 429) || status >= 500 {
                            Attempt::Again {
                                outcome,
                                retry_after: None,
                            }
                        } else {
                            Attempt::Done(outcome)
                        };
                    }
                    Attempt::Done(
                        http_body::read_limited(
                            reqwest::Body::from(resp),
                            METADATA_LIMIT,
                            API,
                            "GET /metadata/identity/oauth2/token",
                        )
                        .await
                        .map_err(|e| hypercloud_cloudprovider::Chain(&e).to_string()),
                    )
                },
                |outcome, attempt, pause| {
                    tracing::debug!(?outcome, attempt, ?pause, "IMDS token request retried");
                },
            )
            .await;
        let body = retried.outcome.map_err(|m| self.error(m))?;
        token_of(&body).map_err(|m| self.error(m))
    }
}

/// The token of an IMDS answer: `access_token` and `expires_in` (a number, or a string of
/// one) are required, as Microsoft's clients require them.
fn token_of(body: &[u8]) -> Result<AccessToken, String> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the answer is not JSON ({e}): {}", excerpt(body)))?;
    let token = v["access_token"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| format!("the answer has no access_token: {}", excerpt(body)))?;
    let expires_in = match &v["expires_in"] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    }
    .filter(|s| (1..=366 * 86_400).contains(s))
    .ok_or_else(|| {
        format!(
            "the answer has no usable expires_in (seconds): {}",
            excerpt_str(&v["expires_in"].to_string())
        )
    })?;
    Ok(AccessToken::new(
        token.to_owned(),
        OffsetDateTime::now_utc() + azure_core::time::Duration::seconds(expires_in),
    ))
}

#[async_trait::async_trait]
impl TokenCredential for ImdsCredential {
    async fn get_token(
        &self,
        scopes: &[&str],
        _: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        let [scope] = scopes else {
            return Err(self.error(format!("one scope is needed, not {}", scopes.len())));
        };
        let resource = scope.strip_suffix("/.default").unwrap_or(scope);
        let mut cached = self.cached.lock().await;
        let fresh_until = OffsetDateTime::now_utc() + azure_core::time::Duration::minutes(5);
        if let Some(t) = cached.as_ref().filter(|t| t.expires_on > fresh_until) {
            return Ok(t.clone());
        }
        let token = self.fetch(resource).await?;
        *cached = Some(token.clone());
        Ok(token)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tokens_need_access_token_and_expires_in() {
        let t =
            token_of(br#"{"access_token":"eyJ.x.y","expires_in":"86399","token_type":"Bearer"}"#)
                .unwrap();
        assert_eq!(t.token.secret(), "eyJ.x.y");
        assert!(token_of(br#"{"access_token":"a","expires_in":3599}"#).is_ok());
        for (body, says) in [
            (&b"<html>no</html>"[..], "not JSON"),
            (br#"{"expires_in": 5}"#, "no access_token"),
            (
                br#"{"access_token": "", "expires_in": 5}"#,
                "no access_token",
            ),
            (
                br#"{"access_token": "a", "expires_on": "1795838328"}"#,
                "no usable expires_in",
            ),
            (
                br#"{"access_token": "a", "expires_in": "soon"}"#,
                "no usable expires_in",
            ),
            (
                br#"{"access_token": "a", "expires_in": -1}"#,
                "no usable expires_in",
            ),
        ] {
            let e = token_of(body).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
