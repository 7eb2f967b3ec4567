//! Which identity each controller acts as (`--use-service-account-credentials`; upstream
//! `k8s.io/controller-manager/pkg/clientbuilder`, the `DynamicControllerClientBuilder`).
//!
//! By default every controller uses the process's own client. With service-account
//! credentials each controller gets a client of its own that authenticates as the
//! ServiceAccount `kube-system/<name>` ([`crate::Controller::service_account`]): the process
//! creates the ServiceAccount when it is missing, asks the apiserver for a token
//! (TokenRequest, one hour), and asks for a new one once 80% of the token's life has passed,
//! as upstream's builder does. The caches (informers) stay on the process's client, as
//! upstream's `shared-informers` client; only what a controller writes carries its identity,
//! so RBAC can grant each controller only what it needs.

use std::sync::{Arc, RwLock};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;

use crate::{Error, Result};

/// The namespace of the controllers' ServiceAccounts (upstream `metav1.NamespaceSystem`).
pub const NAMESPACE: &str = "kube-system";

/// The lifetime asked for in each TokenRequest (upstream `defaultExpirationSeconds`).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// How long before expiry, as a share of the token's lifetime, a new token is requested
/// (upstream `defaultLeewayPercent`).
const LEEWAY_PERCENT: u32 = 20;

/// Retry delay after a failed refresh (a token still valid keeps being used meanwhile).
const RETRY: Duration = Duration::from_secs(10);

/// How the controllers authenticate.
#[derive(Clone, Default)]
pub enum Credentials {
    /// Every controller uses the process's client.
    #[default]
    Shared,
    /// One ServiceAccount per controller (`--use-service-account-credentials=true`).
    ServiceAccounts(Arc<ServiceAccountClients>),
}

/// Builds clients that act as ServiceAccounts of [`NAMESPACE`].
#[derive(Clone)]
pub struct ServiceAccountClients {
    /// Reads and creates the ServiceAccounts and requests their tokens.
    root: kube::Client,
    /// The apiserver's address and CA, without the process's credentials.
    config: kube::Config,
    qps: f32,
    burst: u32,
}

impl ServiceAccountClients {
    /// Clients for the apiserver `config` points at (its credentials are dropped), limited
    /// each to `qps`/`burst` as the process's client is; `root` manages the ServiceAccounts
    /// and their tokens.
    pub fn new(root: kube::Client, mut config: kube::Config, qps: f32, burst: u32) -> Self {
        // upstream `restclient.AnonymousClientConfig`: keep the server and TLS settings.
        config.auth_info = kube::config::AuthInfo::default();
        Self {
            root,
            config,
            qps,
            burst,
        }
    }

    /// A client acting as `kube-system/<account>`, and the task refreshing its token (the
    /// client stops authenticating once the returned guard is dropped and the token expires).
    pub async fn client(&self, account: &str) -> Result<(kube::Client, RefreshGuard)> {
        self.ensure_account(account).await?;
        let (token, expires_in) = self.request_token(account).await?;
        let current = Arc::new(RwLock::new(token));
        let refresher = {
            let this = self.clone();
            let account = account.to_string();
            let current = current.clone();
            tokio::spawn(async move { this.refresh(&account, current, expires_in).await })
        };
        let guard = RefreshGuard(refresher);
        let mut config = self.config.clone();
        // The user agent names the controller, as upstream's `AddUserAgent(name)`.
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_str(&format!("hypercloud/{account}")).map_err(|e| {
                Error::ServiceAccountClient {
                    account: account.to_string(),
                    message: e.to_string(),
                }
            })?,
        ));
        let builder = kube::client::ClientBuilder::try_from(config).map_err(|e| {
            Error::ServiceAccountClient {
                account: account.to_string(),
                message: e.to_string(),
            }
        })?;
        let limit = hypercloud_options::rate_limit::RateLimitLayer::new(self.qps, self.burst);
        let client = builder
            .with_layer(&BearerLayer(current))
            .with_layer(&limit)
            .build();
        Ok((client, guard))
    }

    /// Gets the ServiceAccount, creating it when it is missing (upstream
    /// `getOrCreateServiceAccount`).
    async fn ensure_account(&self, account: &str) -> Result<()> {
        let api: Api<ServiceAccount> = Api::namespaced(self.root.clone(), NAMESPACE);
        let failed = |source| Error::EnsureServiceAccount {
            account: account.to_string(),
            source,
        };
        if api.get_opt(account).await.map_err(failed)?.is_some() {
            return Ok(());
        }
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(account.to_string()),
                namespace: Some(NAMESPACE.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => {
                tracing::info!(%account, namespace = NAMESPACE, "created service account");
                Ok(())
            }
            // Another replica created it first.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(failed(e)),
        }
    }

    /// A new token and how long it is valid.
    async fn request_token(&self, account: &str) -> Result<(String, Duration)> {
        let api: Api<ServiceAccount> = Api::namespaced(self.root.clone(), NAMESPACE);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: Vec::new(),
                expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = api
            .create_token_request(account, &PostParams::default(), &request)
            .await
            .map_err(|source| Error::RequestToken {
                account: account.to_string(),
                source,
            })?;
        let status = answer.status.ok_or_else(|| Error::ServiceAccountClient {
            account: account.to_string(),
            message: "the TokenRequest answer has no status".into(),
        })?;
        let left = status
            .expiration_timestamp
            .0
            .duration_since(k8s_openapi::jiff::Timestamp::now());
        let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
        Ok((status.token, left))
    }

    /// Replaces the token in `current` before it expires, for as long as the task lives.
    async fn refresh(&self, account: &str, current: Arc<RwLock<String>>, mut expires_in: Duration) {
        let mut wait = refresh_after(expires_in);
        loop {
            tokio::time::sleep(wait).await;
            match self.request_token(account).await {
                Ok((token, left)) => {
                    if let Ok(mut t) = current.write() {
                        *t = token;
                    }
                    expires_in = left;
                    wait = refresh_after(left);
                    tracing::debug!(%account, ?left, "refreshed service account token");
                }
                Err(e) => {
                    expires_in = expires_in.saturating_sub(wait);
                    wait = RETRY;
                    tracing::warn!(%account, ?expires_in, error = %hypercloud_cloudprovider::Chain(&e), "refreshing service account token failed; retrying");
                }
            }
        }
    }
}

/// When to ask for a new token for one valid for `lifetime`: after 80% of it.
pub fn refresh_after(lifetime: Duration) -> Duration {
    lifetime.saturating_sub(lifetime * LEEWAY_PERCENT / 100)
}

/// Stops a token's refresh task when dropped.
pub struct RefreshGuard(tokio::task::JoinHandle<()>);

impl Drop for RefreshGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sets `Authorization: Bearer <the current token>` on every request.
#[derive(Clone)]
struct BearerLayer(Arc<RwLock<String>>);

impl<S> tower::Layer<S> for BearerLayer {
    type Service = Bearer<S>;
    fn layer(&self, inner: S) -> Bearer<S> {
        Bearer {
            inner,
            token: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct Bearer<S> {
    inner: S,
    token: Arc<RwLock<String>>,
}

impl<S, B> tower::Service<http::Request<B>> for Bearer<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let value = self
            .token
            .read()
            .ok()
            .and_then(|t| http::HeaderValue::from_str(&format!("Bearer {t}")).ok());
        if let Some(mut v) = value {
            v.set_sensitive(true);
            req.headers_mut().insert(http::header::AUTHORIZATION, v);
        }
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, ServiceExt};

    #[test]
    fn a_token_is_refreshed_after_80_percent_of_its_life() {
        assert_eq!(
            refresh_after(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(refresh_after(Duration::ZERO), Duration::ZERO);
    }

    #[tokio::test]
    async fn every_request_carries_the_current_token() {
        let token = Arc::new(RwLock::new("first".to_string()));
        let svc = BearerLayer(token.clone()).layer(tower::service_fn(
            |req: http::Request<()>| async move {
                Ok::<_, std::convert::Infallible>(
                    req.headers()
                        .get(http::header::AUTHORIZATION)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string(),
                )
            },
        ));
        let seen = svc
            .clone()
            .oneshot(http::Request::new(()))
            .await
            .expect("call");
        assert_eq!(seen, "Bearer first");
        *token.write().expect("lock") = "second".into();
        let seen = svc.oneshot(http::Request::new(())).await.expect("call");
        assert_eq!(seen, "Bearer second");
    }
}
