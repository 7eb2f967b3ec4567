//! Delegated authentication and authorization (upstream `DelegatingAuthenticationOptions` /
//! `DelegatingAuthorizationOptions`): a bearer token is checked with a TokenReview, the
//! user it names with a SubjectAccessReview on the non-resource path, both answered by the
//! apiserver and cached briefly, as upstream's webhook caches do. Paths in
//! `--authorization-always-allow-paths` skip both (a trailing `*` matches a prefix).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::Api;

/// How long a review result is reused (upstream's token and authorization caches use 10s).
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Caches are cleared when they grow beyond this many entries.
const CACHE_MAX: usize = 4096;

/// The outcome of checking one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Served.
    Allow,
    /// 401: no token, or the apiserver does not know it.
    Unauthenticated(String),
    /// 403: the user may not `verb` the path.
    Forbidden(String),
}

/// (user, path, verb).
type DecisionKey = (String, String, String);

/// Decides whether a request to the admin server is served.
pub struct Authorizer {
    authn: kube::Client,
    authz: kube::Client,
    always_allow: Vec<String>,
    tokens: Mutex<HashMap<String, (Instant, Option<UserInfo>)>>,
    decisions: Mutex<HashMap<DecisionKey, (Instant, Decision)>>,
}

impl Authorizer {
    /// `authn` creates TokenReviews, `authz` SubjectAccessReviews (both may be the main
    /// client); `always_allow` is `--authorization-always-allow-paths`.
    pub fn new(authn: kube::Client, authz: kube::Client, always_allow: Vec<String>) -> Self {
        Self {
            authn,
            authz,
            always_allow,
            tokens: Mutex::default(),
            decisions: Mutex::default(),
        }
    }

    /// Whether `path` is served without authentication or authorization.
    pub fn always_allowed(&self, path: &str) -> bool {
        path_allowed(&self.always_allow, path)
    }

    /// Checks a request: `bearer` is the token of its `Authorization` header, if any.
    pub async fn check(&self, method: &http::Method, path: &str, bearer: Option<&str>) -> Decision {
        if self.always_allowed(path) {
            return Decision::Allow;
        }
        let Some(token) = bearer.filter(|t| !t.is_empty()) else {
            return Decision::Unauthenticated("no bearer token".into());
        };
        let user = match self.authenticate(token).await {
            Ok(Some(u)) => u,
            Ok(None) => return Decision::Unauthenticated("invalid bearer token".into()),
            Err(e) => {
                tracing::warn!(error = %e, "TokenReview failed");
                return Decision::Unauthenticated(format!("token review failed: {e}"));
            }
        };
        let verb = verb(method);
        let name = user.username.clone().unwrap_or_default();
        let key = (name.clone(), path.to_string(), verb.to_string());
        if let Some(d) = cached(&self.decisions, &key) {
            return d;
        }
        let decision = match self.authorize(&user, path, verb).await {
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
                tracing::warn!(error = %e, "SubjectAccessReview failed");
                // Not cached: the next request asks again.
                return Decision::Forbidden(format!("authorization failed: {e}"));
            }
        };
        store(&self.decisions, key, decision.clone());
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
        store(&self.tokens, token.to_string(), user.clone());
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

fn cached<K: std::hash::Hash + Eq, V: Clone>(
    cache: &Mutex<HashMap<K, (Instant, V)>>,
    key: &K,
) -> Option<V> {
    let c = cache.lock().unwrap_or_else(|p| p.into_inner());
    c.get(key)
        .filter(|(at, _)| at.elapsed() < CACHE_TTL)
        .map(|(_, v)| v.clone())
}

fn store<K: std::hash::Hash + Eq, V>(cache: &Mutex<HashMap<K, (Instant, V)>>, key: K, value: V) {
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    if c.len() >= CACHE_MAX {
        c.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        if c.len() >= CACHE_MAX {
            c.clear();
        }
    }
    c.insert(key, (Instant::now(), value));
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
    fn verbs_are_lower_case_http_methods() {
        assert_eq!(verb(&http::Method::GET), "get");
        assert_eq!(verb(&http::Method::POST), "post");
    }
}
