//! Delegated authentication and authorization (upstream `DelegatingAuthenticationOptions` /
//! `DelegatingAuthorizationOptions`): the user comes from a front proxy's request headers or
//! a client certificate ([`crate::authn`]), or from a bearer token checked with a
//! TokenReview; a SubjectAccessReview on the non-resource path decides. Both reviews are
//! answered by the apiserver and cached as upstream's webhook caches are, for the
//! `--authentication-token-webhook-cache-ttl` and `--authorization-webhook-cache-*` durations.
//! Paths in `--authorization-always-allow-paths` skip both (a trailing `*` matches a prefix).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::Api;
use rustls_pki_types::CertificateDer;

use crate::authn::CertAuthenticators;

/// Failed reviews, which every request repeats while the API server is unreachable.
static REVIEW_WARNINGS: hypercloud_cloudprovider::throttle::WarnLimiter =
    hypercloud_cloudprovider::throttle::WarnLimiter::new(
        hypercloud_cloudprovider::throttle::WARN_INTERVAL,
    );

/// Upstream's default cache durations of the token and authorization webhooks.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(10);
/// Caches are cleared when they grow beyond this many entries.
const CACHE_MAX: usize = 4096;

/// The outcome of checking one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Served.
    Allow,
    /// 401: no credentials, or none that the admin server trusts.
    Unauthenticated(String),
    /// 403: the user may not `verb` the path.
    Forbidden(String),
}

/// What a request presented.
#[derive(Clone, Copy, Debug, Default)]
pub struct Credentials<'a> {
    /// The token of its `Authorization: Bearer` header.
    pub bearer: Option<&'a str>,
    /// The client certificate chain of its connection, leaf first.
    pub certificates: &'a [CertificateDer<'static>],
    /// Its headers (request-header authentication).
    pub headers: Option<&'a HeaderMap>,
}

/// How requests are authenticated and authorised besides the reviews.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// `--authorization-always-allow-paths`.
    pub always_allow: Vec<String>,
    /// Client-certificate and request-header authentication ([`crate::authn`]).
    pub certificates: CertAuthenticators,
    /// `--authentication-token-webhook-cache-ttl`: TokenReview results (both answers).
    pub token_cache_ttl: Duration,
    /// `--authorization-webhook-cache-authorized-ttl`.
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl`.
    pub unauthorized_ttl: Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            always_allow: Vec::new(),
            certificates: CertAuthenticators::default(),
            token_cache_ttl: DEFAULT_CACHE_TTL,
            authorized_ttl: DEFAULT_CACHE_TTL,
            unauthorized_ttl: DEFAULT_CACHE_TTL,
        }
    }
}

/// The whole SubjectAccessReview question: user, uid, groups, extra, path, verb.
type DecisionKey = String;

/// An entry is used until its deadline.
type Cache<K, V> = Mutex<HashMap<K, (Instant, V)>>;

/// Decides whether a request to the admin server is served.
pub struct Authorizer {
    authn: kube::Client,
    authz: kube::Client,
    config: AuthConfig,
    tokens: Cache<String, Option<UserInfo>>,
    decisions: Cache<DecisionKey, Decision>,
}

impl Authorizer {
    /// `authn` creates TokenReviews, `authz` SubjectAccessReviews (both may be the main
    /// client).
    pub fn new(authn: kube::Client, authz: kube::Client, config: AuthConfig) -> Self {
        Self {
            authn,
            authz,
            config,
            tokens: Mutex::default(),
            decisions: Mutex::default(),
        }
    }

    /// Whether the TLS handshake should ask for a client certificate.
    pub fn wants_client_certificates(&self) -> bool {
        self.config.certificates.wants_client_certificates()
    }

    /// Whether `path` is served without authentication or authorization.
    pub fn always_allowed(&self, path: &str) -> bool {
        path_allowed(&self.config.always_allow, path)
    }

    /// Checks a request (upstream's union of authenticators: request header, client
    /// certificate, bearer token; then the SubjectAccessReview).
    pub async fn check(
        &self,
        method: &http::Method,
        path: &str,
        credentials: Credentials<'_>,
    ) -> Decision {
        if self.always_allowed(path) {
            return Decision::Allow;
        }
        let empty = HeaderMap::new();
        let headers = credentials.headers.unwrap_or(&empty);
        let mut failures = match self
            .config
            .certificates
            .authenticate(credentials.certificates, headers)
        {
            Ok(Some(user)) => return self.decide(&user, method, path).await,
            Ok(None) => Vec::new(),
            Err(errors) => errors,
        };
        let user = match credentials.bearer.filter(|t| !t.is_empty()) {
            None => None,
            Some(token) => match self.authenticate(token).await {
                Ok(Some(u)) => Some(u),
                Ok(None) => {
                    failures.push("invalid bearer token".into());
                    None
                }
                Err(e) => {
                    // Any client can trigger this at will (the API server being away).
                    if let Some(suppressed) = REVIEW_WARNINGS.allow() {
                        tracing::warn!(error = %e, suppressed, "TokenReview failed");
                    }
                    failures.push(format!("token review failed: {e}"));
                    None
                }
            },
        };
        match user {
            Some(u) => self.decide(&u, method, path).await,
            None if failures.is_empty() => Decision::Unauthenticated("no credentials".into()),
            None => Decision::Unauthenticated(failures.join("; ")),
        }
    }

    async fn decide(&self, user: &UserInfo, method: &http::Method, path: &str) -> Decision {
        let verb = verb(method);
        let name = user.username.clone().unwrap_or_default();
        let key = format!(
            "{name}\0{:?}\0{:?}\0{:?}\0{path}\0{verb}",
            user.uid, user.groups, user.extra
        );
        if let Some(d) = cached(&self.decisions, &key) {
            return d;
        }
        let decision = match self.authorize(user, path, verb).await {
            Ok((true, _)) => Decision::Allow,
            Ok((false, reason)) => Decision::Forbidden(format!(
                "User \"{name}\" cannot {verb} path \"{path}\"{}",
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(": {reason}")
                }
            )),
            Err(e) => {
                if let Some(suppressed) = REVIEW_WARNINGS.allow() {
                    tracing::warn!(error = %e, suppressed, "SubjectAccessReview failed");
                }
                // Not cached: the next request asks again.
                return Decision::Forbidden(format!("authorization failed: {e}"));
            }
        };
        let ttl = if decision == Decision::Allow {
            self.config.authorized_ttl
        } else {
            self.config.unauthorized_ttl
        };
        store(&self.decisions, key, decision.clone(), ttl);
        decision
    }

    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, kube::Error> {
        if let Some(u) = cached(&self.tokens, &token.to_string()) {
            return Ok(u);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = Api::<TokenReview>::all(self.authn.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let user = answer
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user);
        store(
            &self.tokens,
            token.to_string(),
            user.clone(),
            self.config.token_cache_ttl,
        );
        Ok(user)
    }

    async fn authorize(
        &self,
        user: &UserInfo,
        path: &str,
        verb: &str,
    ) -> Result<(bool, String), kube::Error> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                groups: user.groups.clone(),
                uid: user.uid.clone(),
                extra: user.extra.clone(),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.authz.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let status = answer.status.unwrap_or_default();
        Ok((
            status.allowed && status.denied != Some(true),
            status.reason.unwrap_or_default(),
        ))
    }
}

fn cached<K: std::hash::Hash + Eq, V: Clone>(cache: &Cache<K, V>, key: &K) -> Option<V> {
    let c = cache.lock().unwrap_or_else(|p| p.into_inner());
    c.get(key)
        .filter(|(until, _)| Instant::now() < *until)
        .map(|(_, v)| v.clone())
}

/// Keeps `value` for `ttl` (a zero `ttl` keeps nothing, as upstream's caches).
fn store<K: std::hash::Hash + Eq, V>(cache: &Cache<K, V>, key: K, value: V, ttl: Duration) {
    if ttl.is_zero() {
        return;
    }
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    if c.len() >= CACHE_MAX {
        let now = Instant::now();
        c.retain(|_, (until, _)| now < *until);
        if c.len() >= CACHE_MAX {
            c.clear();
        }
    }
    c.insert(key, (Instant::now() + ttl, value));
}

/// Upstream's verb for a non-resource request.
fn verb(method: &http::Method) -> &'static str {
    match *method {
        http::Method::POST => "post",
        http::Method::PUT => "put",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        http::Method::HEAD => "head",
        http::Method::OPTIONS => "options",
        _ => "get",
    }
}

fn path_allowed(allow: &[String], path: &str) -> bool {
    allow.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => p == path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allow_paths_match_exactly_or_by_prefix() {
        let allow: Vec<String> = ["/healthz", "/readyz", "/livez", "/debug/*"]
            .map(String::from)
            .to_vec();
        assert!(path_allowed(&allow, "/healthz"));
        assert!(path_allowed(&allow, "/debug/pprof"));
        assert!(!path_allowed(&allow, "/metrics"));
        assert!(!path_allowed(&allow, "/healthz/extra"));
    }

    #[test]
    fn cache_entries_live_for_their_ttl_and_zero_keeps_nothing() {
        let cache: Cache<&str, u8> = Mutex::default();
        store(&cache, "none", 1, Duration::ZERO);
        assert_eq!(cached(&cache, &"none"), None);
        store(&cache, "long", 2, Duration::from_secs(3600));
        assert_eq!(cached(&cache, &"long"), Some(2));
        store(&cache, "short", 3, Duration::from_nanos(1));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(cached(&cache, &"short"), None);
    }

    #[test]
    fn verbs_are_lower_case_http_methods() {
        assert_eq!(verb(&http::Method::GET), "get");
        assert_eq!(verb(&http::Method::POST), "post");
    }
}
