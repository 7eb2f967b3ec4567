//! The credential of `azure.json` ([`Credential`]) as an azure_core [`TokenCredential`]:
//! a client secret through azure_identity's `ClientSecretCredential`, a client certificate
//! through its `ClientAssertionCredential` with an assertion signed here
//! ([`super::certificate`]), a managed identity through IMDS ([`super::imds`]). Entra is
//! asked at the Environment's `activeDirectoryEndpoint` (so `cloud: AzureStackCloud` with an
//! environment file points it anywhere), over the same TLS set-up as Resource Manager. Every
//! token is checked ([`Checked`]): an empty one, which azure_identity passes on from a `{}`
//! answer, is an error naming the credential; an answer that is not a JSON object (an HTML
//! page, a proxy's 500) is an error quoting it ([`EntraAnswers`]), where azure_identity would
//! only say that JSON was expected.

use std::sync::Arc;

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use azure_core::credentials::{AccessToken, Secret, TokenCredential, TokenRequestOptions};
use azure_core::error::ErrorKind;
use azure_core::http::policies::{Policy, PolicyResult};
use azure_core::http::{
    AsyncRawResponse, ClientOptions, Context, ExponentialRetryOptions, Request, RetryOptions, Url,
};
use azure_identity::{
    ClientAssertionCredential, ClientAssertionCredentialOptions, ClientSecretCredential,
    ClientSecretCredentialOptions,
};
use hypercloud_cloudprovider::http_body::{self, excerpt, OBJECT_LIMIT};
use serde_json::Value;

use super::certificate::CertificateAssertion;
use super::imds::ImdsCredential;
use super::transport::StreamBody;
use crate::config::{Backoff, Credential};
use crate::error::{Error, Result};

/// What a credential needs besides `azure.json`'s keys.
pub(crate) struct Setup<'a> {
    pub tenant_id: Option<&'a str>,
    pub authority: &'a str,
    pub backoff: Option<Backoff>,
    /// The transport to Entra (capped answers, the extra CA).
    pub transport: azure_core::http::Transport,
    /// A client for IMDS (plain HTTP, no proxy, no redirects).
    pub imds_http: reqwest::Client,
    pub imds_endpoint: &'a str,
}

/// The token endpoint of `tenant` under `authority`, as azure_identity forms it (its path is
/// replaced, so an authority's own path does not count).
pub(crate) fn token_endpoint(authority: &str, tenant: &str) -> Result<Url> {
    let err = |message: String| Error::Endpoint {
        what: "activeDirectoryEndpoint",
        url: authority.into(),
        message,
    };
    let base = Url::parse(authority).map_err(|e| err(e.to_string()))?;
    if base.scheme() != "https" {
        return Err(err("Entra ID is only asked over https".into()));
    }
    base.join(&format!("/{tenant}/oauth2/v2.0/token"))
        .map_err(|e| err(e.to_string()))
}

/// The SDK's options for a credential: the transport, Entra at `authority`, and retries of
/// the token request as `cloudProviderBackoff` says (none without it, as for ARM calls).
fn client_options(setup: &Setup<'_>) -> ClientOptions {
    let mut cloud = CustomConfiguration::default();
    cloud.authority_host = setup.authority.to_owned();
    let retry = match setup.backoff {
        Some(b) if b.retries > 1 => RetryOptions::exponential(ExponentialRetryOptions {
            initial_delay: sdk_duration(b.duration),
            max_retries: b.retries - 1,
            max_total_elapsed: azure_core::time::Duration::seconds(60),
            max_delay: azure_core::time::Duration::seconds(30),
        }),
        _ => RetryOptions::none(),
    };
    ClientOptions {
        per_call_policies: vec![Arc::new(EntraAnswers)],
        transport: Some(setup.transport.clone()),
        cloud: Some(Arc::new(CloudConfiguration::Custom(cloud))),
        retry,
        ..ClientOptions::default()
    }
}

fn sdk_duration(d: std::time::Duration) -> azure_core::time::Duration {
    azure_core::time::Duration::milliseconds(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The credential of `credential`.
pub(crate) fn new_credential(
    credential: &Credential,
    setup: Setup<'_>,
) -> Result<Arc<dyn TokenCredential>> {
    let tenant = || {
        setup.tenant_id.ok_or_else(|| Error::NewCredential {
            credential: "Entra ID",
            source: azure_core::Error::with_message(
                ErrorKind::Credential,
                "tenantId is required (unless useManagedIdentityExtension is true)",
            ),
        })
    };
    let (name, inner): (&'static str, Arc<dyn TokenCredential>) = match credential {
        Credential::ClientSecret { client_id, secret } => {
            let options = ClientSecretCredentialOptions {
                client_options: client_options(&setup),
            };
            let c = ClientSecretCredential::new(
                tenant()?,
                client_id.clone(),
                Secret::new(secret.clone()),
                Some(options),
            )
            .map_err(|source| Error::NewCredential {
                credential: "client secret",
                source,
            })?;
            ("client secret", c)
        }
        Credential::ClientCertificate {
            client_id,
            cert_path,
            password: _,
        } => {
            let tenant = tenant()?;
            let audience = token_endpoint(setup.authority, tenant)?;
            let assertion =
                CertificateAssertion::from_file(cert_path, client_id, audience.as_str())?;
            let options = ClientAssertionCredentialOptions {
                client_options: client_options(&setup),
            };
            let c = ClientAssertionCredential::new(
                tenant.to_owned(),
                client_id.clone(),
                assertion,
                Some(options),
            )
            .map_err(|source| Error::NewCredential {
                credential: "client certificate",
                source,
            })?;
            ("client certificate", c)
        }
        Credential::ManagedIdentity {
            user_assigned_identity_id,
        } => (
            "managed identity",
            Arc::new(ImdsCredential::new(
                setup.imds_http.clone(),
                setup.imds_endpoint,
                user_assigned_identity_id.clone(),
            )),
        ),
    };
    Ok(Arc::new(Checked { name, inner }))
}

/// Refuses, with an excerpt, a token endpoint's answer that is not a JSON object (success or
/// Entra's error document both are). Per call, so it sees the answer after the SDK's retries.
#[derive(Debug)]
struct EntraAnswers;

#[async_trait::async_trait]
impl Policy for EntraAnswers {
    async fn send(
        &self,
        ctx: &Context,
        request: &mut Request,
        next: &[Arc<dyn Policy>],
    ) -> PolicyResult {
        let Some((first, rest)) = next.split_first() else {
            return Err(azure_core::Error::with_message(
                ErrorKind::Other,
                "no transport after the token answer check",
            ));
        };
        let resp = first.send(ctx, request, rest).await?;
        let (status, headers, body) = resp.deconstruct();
        let code = u16::from(status);
        let call = format!("{} {}", request.method(), request.url().path());
        let bytes = if (200..300).contains(&code) {
            http_body::read_limited(StreamBody(body), OBJECT_LIMIT, "Microsoft Entra ID", &call)
                .await
                .map_err(|e| {
                    azure_core::Error::with_error(ErrorKind::Io, e, "reading the token answer")
                })?
        } else {
            http_body::read_prefix(StreamBody(body)).await.0
        };
        if !matches!(serde_json::from_slice(&bytes), Ok(Value::Object(_))) {
            return Err(azure_core::Error::with_message(
                ErrorKind::Credential,
                format!(
                    "the token endpoint answered {call} with HTTP {code} and not a JSON object: {}",
                    excerpt(&bytes)
                ),
            ));
        }
        Ok(AsyncRawResponse::from_bytes(status, headers, bytes))
    }
}

/// A credential whose tokens are checked before use.
#[derive(Debug)]
pub(crate) struct Checked {
    name: &'static str,
    inner: Arc<dyn TokenCredential>,
}

#[async_trait::async_trait]
impl TokenCredential for Checked {
    async fn get_token(
        &self,
        scopes: &[&str],
        options: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        let token = self.inner.get_token(scopes, options).await?;
        if token.token.secret().trim().is_empty() {
            return Err(azure_core::Error::with_message(
                ErrorKind::Credential,
                format!(
                    "the {} credential's token endpoint answered without an access_token",
                    self.name
                ),
            ));
        }
        Ok(token)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_token_endpoint_replaces_the_authority_path() {
        assert_eq!(
            token_endpoint("https://127.0.0.1:18443/", "t1")
                .unwrap()
                .as_str(),
            "https://127.0.0.1:18443/t1/oauth2/v2.0/token"
        );
        assert_eq!(
            token_endpoint("https://login.microsoftonline.com/common/", "t1")
                .unwrap()
                .as_str(),
            "https://login.microsoftonline.com/t1/oauth2/v2.0/token"
        );
        let e = token_endpoint("http://127.0.0.1/", "t").unwrap_err();
        assert!(e.to_string().contains("only asked over https"), "{e}");
    }
}
