//! Client-certificate and request-header (front-proxy) authentication of the admin server
//! (upstream `DelegatingAuthenticationOptions`: `--client-ca-file`, `--requestheader-*`, and
//! the in-cluster lookup of the `kube-system/extension-apiserver-authentication` ConfigMap
//! unless `--authentication-skip-lookup`).
//!
//! The TLS handshake only asks for a client certificate and checks that the client holds its
//! key ([`crate::tls`]); the chain is verified here, per authenticator, against that
//! authenticator's CA, as upstream's x509 authenticators do, so a certificate of an unknown
//! authority is a 401, not a failed handshake. Upstream's order: request header first, then
//! the client certificate, then the bearer token ([`crate::auth`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::HeaderMap;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};

use crate::{Error, Result};

/// Namespace of the ConfigMap the apiserver publishes its client authentication settings in.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// Name of that ConfigMap.
pub const AUTHENTICATION_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";
/// The group every authenticated user is in (upstream's `AuthenticatedGroupAdder`).
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// A bundle of certificate authorities that client certificates are verified against.
#[derive(Clone)]
pub struct ClientCa {
    source: String,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCa")
            .field("source", &self.source)
            .finish()
    }
}

impl ClientCa {
    /// The CAs in `pem`; `source` names where they came from (a file, a ConfigMap key).
    pub fn from_pem(source: impl Into<String>, pem: &[u8]) -> Result<Self> {
        let source = source.into();
        let bad = |message: String| Error::ParseClientCa {
            source_name: source.clone(),
            message,
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| bad(e.to_string()))?;
            roots.add(cert).map_err(|e| bad(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(bad("no CERTIFICATE block".into()));
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|e| bad(e.to_string()))?;
        Ok(Self { source, verifier })
    }

    /// The CAs of a PEM file.
    pub fn from_file(flag: &str, path: &Path) -> Result<Self> {
        let pem = crate::tls::read(flag, path)?;
        Self::from_pem(format!("{flag} {}", path.display()), pem.as_bytes())
    }

    /// Where the CAs came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether `chain` (leaf first) leads to one of the CAs and may authenticate a client.
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err("no client certificate".into());
        };
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| format!("verifying certificate against {}: {e}", self.source))
    }
}

/// Request-header authentication: a client certificate of `ca` (with a CommonName in
/// `allowed_names`, unless that is empty) may name the user in headers.
#[derive(Clone, Debug)]
pub struct RequestHeader {
    /// `--requestheader-client-ca-file`.
    pub ca: ClientCa,
    /// `--requestheader-allowed-names`.
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub extra_headers_prefix: Vec<String>,
}

impl RequestHeader {
    /// `Ok(None)`: no certificate, or no user named in the headers (the next authenticator
    /// decides); `Err`: a certificate this authenticator does not trust.
    pub fn authenticate(
        &self,
        chain: &[CertificateDer<'static>],
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, String> {
        if chain.is_empty() {
            return Ok(None);
        }
        self.ca.verify(chain)?;
        if !self.allowed_names.is_empty() {
            let (cn, _) = subject(&chain[0])?;
            if !self.allowed_names.contains(&cn) {
                return Err(format!(
                    "client certificate CommonName {cn:?} is not in --requestheader-allowed-names"
                ));
            }
        }
        let Some(name) = first_value(headers, &self.username_headers) else {
            return Ok(None);
        };
        let groups: Vec<String> = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect();
        let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
        for prefix in &self.extra_headers_prefix {
            let prefix = prefix.to_ascii_lowercase();
            for (key, value) in headers {
                let Some(k) = key.as_str().strip_prefix(prefix.as_str()) else {
                    continue;
                };
                if k.is_empty() {
                    continue;
                }
                if let Ok(v) = value.to_str() {
                    extra.entry(unescape(k)).or_default().push(v.to_string());
                }
            }
        }
        Ok(Some(user(
            name,
            first_value(headers, &self.uid_headers),
            groups,
            extra,
        )))
    }
}

/// The identity of a verified client certificate: CommonName as user, Organizations as
/// groups (upstream `CommonNameUserConversion`); a certificate without a CommonName names
/// no one.
pub fn certificate_user(cert: &CertificateDer<'_>) -> Result<Option<UserInfo>, String> {
    let (cn, orgs) = subject(cert)?;
    if cn.is_empty() {
        return Ok(None);
    }
    Ok(Some(user(cn, None, orgs, Default::default())))
}

fn user(
    name: String,
    uid: Option<String>,
    mut groups: Vec<String>,
    extra: std::collections::BTreeMap<String, Vec<String>>,
) -> UserInfo {
    if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
        groups.push(AUTHENTICATED_GROUP.to_string());
    }
    UserInfo {
        username: Some(name),
        uid,
        groups: Some(groups),
        extra: (!extra.is_empty()).then_some(extra),
    }
}

/// (CommonName, Organizations) of a certificate's subject.
fn subject(cert: &CertificateDer<'_>) -> Result<(String, Vec<String>), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("parsing client certificate: {e}"))?;
    let subject = parsed.subject();
    let cn = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .unwrap_or_default()
        .to_string();
    let orgs = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_string)
        .collect();
    Ok((cn, orgs))
}

/// The first non-empty value among `names`, in their order.
fn first_value(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names.iter().find_map(|n| {
        headers
            .get(n.as_str())
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    })
}

/// Extra keys are percent-encoded in header names (upstream `unescapeExtraKey`: on a bad
/// escape the key is kept as it is).
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => return key.to_string(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

/// The certificate authenticators the admin server runs (either may be absent).
#[derive(Clone, Debug, Default)]
pub struct CertAuthenticators {
    /// Front-proxy authentication.
    pub request_header: Option<RequestHeader>,
    /// x509 client certificates.
    pub client_ca: Option<ClientCa>,
}

impl CertAuthenticators {
    /// Whether the TLS handshake should ask for a client certificate.
    pub fn wants_client_certificates(&self) -> bool {
        self.request_header.is_some() || self.client_ca.is_some()
    }

    /// Upstream's union: the request header, then the certificate itself. `Ok(None)` when
    /// neither names a user; `Err` with every reason when a certificate was presented and
    /// nothing trusted it.
    pub fn authenticate(
        &self,
        chain: &[CertificateDer<'static>],
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, Vec<String>> {
        if chain.is_empty() {
            return Ok(None);
        }
        let mut errors = Vec::new();
        if let Some(rh) = &self.request_header {
            match rh.authenticate(chain, headers) {
                Ok(Some(u)) => return Ok(Some(u)),
                Ok(None) => {}
                Err(e) => errors.push(format!("request header: {e}")),
            }
        }
        if let Some(ca) = &self.client_ca {
            match ca.verify(chain).and_then(|()| certificate_user(&chain[0])) {
                Ok(Some(u)) => return Ok(Some(u)),
                Ok(None) => {}
                Err(e) => errors.push(format!("x509: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(None)
        } else {
            Err(errors)
        }
    }
}

/// The authentication flags (upstream `DelegatingAuthenticationOptions`), as given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DelegatingAuthentication {
    /// `--client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-client-ca-file`.
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names`.
    pub requestheader_allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub requestheader_username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub requestheader_uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub requestheader_group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// `--authentication-skip-lookup`.
    pub skip_lookup: bool,
    /// `--authentication-tolerate-lookup-failure`.
    pub tolerate_lookup_failure: bool,
}

impl DelegatingAuthentication {
    /// The authenticators: the files given, and unless `--authentication-skip-lookup`, what
    /// is missing read from the `extension-apiserver-authentication` ConfigMap with `client`
    /// (the `--authentication-kubeconfig` one). The ConfigMap is read once, at start
    /// (upstream keeps watching it).
    pub async fn build(&self, client: &kube::Client) -> Result<CertAuthenticators> {
        let mut out = CertAuthenticators::default();
        if let Some(path) = &self.client_ca_file {
            out.client_ca = Some(ClientCa::from_file("--client-ca-file", path)?);
        }
        if let Some(path) = &self.requestheader_client_ca_file {
            out.request_header = Some(RequestHeader {
                ca: ClientCa::from_file("--requestheader-client-ca-file", path)?,
                allowed_names: self.requestheader_allowed_names.clone(),
                username_headers: self.requestheader_username_headers.clone(),
                uid_headers: self.requestheader_uid_headers.clone(),
                group_headers: self.requestheader_group_headers.clone(),
                extra_headers_prefix: self.requestheader_extra_headers_prefix.clone(),
            });
        }
        if self.skip_lookup || (out.client_ca.is_some() && out.request_header.is_some()) {
            return Ok(out);
        }
        match lookup(client).await {
            Ok(None) => {
                tracing::info!(
                    "ConfigMap {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP_NAME} not found: no client-certificate or request-header authentication from the cluster"
                );
            }
            Ok(Some(cm)) => {
                let data = cm.data.unwrap_or_default();
                let key_source = |key: &str| {
                    format!("configmap {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP_NAME} {key}")
                };
                if out.client_ca.is_none() {
                    if let Some(pem) = data.get("client-ca-file") {
                        out.client_ca = Some(ClientCa::from_pem(
                            key_source("client-ca-file"),
                            pem.as_bytes(),
                        )?);
                    }
                }
                if out.request_header.is_none() {
                    if let Some(pem) = data.get("requestheader-client-ca-file") {
                        let list = |key: &str| -> Result<Vec<String>> {
                            match data.get(key) {
                                None => Ok(Vec::new()),
                                Some(v) if v.trim().is_empty() => Ok(Vec::new()),
                                Some(v) => {
                                    serde_json::from_str(v).map_err(|e| Error::ParseClientCa {
                                        source_name: key_source(key),
                                        message: format!("not a JSON list of strings: {e}"),
                                    })
                                }
                            }
                        };
                        out.request_header = Some(RequestHeader {
                            ca: ClientCa::from_pem(
                                key_source("requestheader-client-ca-file"),
                                pem.as_bytes(),
                            )?,
                            allowed_names: list("requestheader-allowed-names")?,
                            username_headers: list("requestheader-username-headers")?,
                            uid_headers: list("requestheader-uid-headers")?,
                            group_headers: list("requestheader-group-headers")?,
                            extra_headers_prefix: list("requestheader-extra-headers-prefix")?,
                        });
                    }
                }
            }
            Err(e) => {
                if matches!(&e, kube::Error::Api(s) if s.code == 403) {
                    tracing::warn!(
                        "unable to get configmap/{AUTHENTICATION_CONFIGMAP_NAME} in {AUTHENTICATION_CONFIGMAP_NAMESPACE}: usually fixed by 'kubectl create rolebinding -n {AUTHENTICATION_CONFIGMAP_NAMESPACE} ROLEBINDING_NAME --role=extension-apiserver-authentication-reader --serviceaccount=YOUR_NS:YOUR_SA'"
                    );
                }
                if !self.tolerate_lookup_failure {
                    return Err(Error::LookupAuthentication(e));
                }
                tracing::warn!(error = %e, "error looking up in-cluster authentication configuration; continuing without it (client certificates and request headers are then trusted only from the files given); to require the lookup to succeed, set --authentication-tolerate-lookup-failure=false");
            }
        }
        Ok(out)
    }
}

async fn lookup(client: &kube::Client) -> Result<Option<ConfigMap>, kube::Error> {
    Api::<ConfigMap>::namespaced(client.clone(), AUTHENTICATION_CONFIGMAP_NAMESPACE)
        .get_opt(AUTHENTICATION_CONFIGMAP_NAME)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair,
    };

    fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("ca")
    }

    fn client(
        issuer: &CertifiedIssuer<'static, KeyPair>,
        cn: &str,
        orgs: &[&str],
    ) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().expect("key");
        params.signed_by(&key, issuer).expect("sign").der().clone()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        h
    }

    fn request_header(ca: &CertifiedIssuer<'static, KeyPair>, allowed: &[&str]) -> RequestHeader {
        RequestHeader {
            ca: ClientCa::from_pem("proxy-ca", ca.pem().as_bytes()).expect("ca"),
            allowed_names: allowed.iter().map(|s| s.to_string()).collect(),
            username_headers: vec!["x-remote-user".into()],
            uid_headers: vec!["x-remote-uid".into()],
            group_headers: vec!["x-remote-group".into()],
            extra_headers_prefix: vec!["X-Remote-Extra-".into()],
        }
    }

    #[test]
    fn client_certificate_names_user_and_groups() {
        let ca1 = ca("ca1");
        let auth = CertAuthenticators {
            client_ca: Some(ClientCa::from_pem("ca1", ca1.pem().as_bytes()).expect("ca")),
            request_header: None,
        };
        // (rcgen keeps one value per attribute type: one Organization here.)
        let cert = client(&ca1, "alice", &["devs"]);
        let u = auth
            .authenticate(&[cert], &HeaderMap::new())
            .expect("trusted")
            .expect("user");
        assert_eq!(u.username.as_deref(), Some("alice"));
        assert_eq!(u.groups.unwrap_or_default(), ["devs", AUTHENTICATED_GROUP]);
        let stranger = client(&ca("other"), "mallory", &[]);
        let err = auth
            .authenticate(&[stranger], &HeaderMap::new())
            .expect_err("unknown CA");
        assert!(
            err[0].starts_with("x509: verifying certificate against ca1"),
            "{err:?}"
        );
        assert_eq!(auth.authenticate(&[], &HeaderMap::new()), Ok(None));
    }

    #[test]
    fn request_header_needs_a_trusted_allowed_proxy() {
        let proxy_ca = ca("proxy-ca");
        let rh = request_header(&proxy_ca, &["front-proxy"]);
        let proxy = client(&proxy_ca, "front-proxy", &[]);
        let h = headers(&[
            ("X-Remote-User", "bob"),
            ("X-Remote-Uid", "42"),
            ("X-Remote-Group", "g1"),
            ("X-Remote-Group", "g2"),
            ("X-Remote-Extra-Scopes", "a"),
            ("X-Remote-Extra-Acme.com%2Fproject", "p"),
        ]);
        let u = rh
            .authenticate(std::slice::from_ref(&proxy), &h)
            .expect("ok")
            .expect("user");
        assert_eq!(u.username.as_deref(), Some("bob"));
        assert_eq!(u.uid.as_deref(), Some("42"));
        assert_eq!(
            u.groups.unwrap_or_default(),
            ["g1", "g2", AUTHENTICATED_GROUP]
        );
        let extra = u.extra.unwrap_or_default();
        assert_eq!(extra["scopes"], ["a"]);
        assert_eq!(extra["acme.com/project"], ["p"]);
        // No user header: not this authenticator's request.
        assert_eq!(
            rh.authenticate(std::slice::from_ref(&proxy), &HeaderMap::new()),
            Ok(None)
        );
        // A proxy certificate of the right CA with a CommonName not allowed.
        let other = client(&proxy_ca, "not-the-proxy", &[]);
        let err = rh
            .authenticate(std::slice::from_ref(&other), &h)
            .expect_err("name");
        assert!(err.contains("--requestheader-allowed-names"), "{err}");
        // Any name, when the list is empty.
        assert!(request_header(&proxy_ca, &[])
            .authenticate(&[other], &h)
            .expect("any")
            .is_some());
        // A certificate of another CA.
        let err = rh
            .authenticate(&[client(&ca("x"), "front-proxy", &[])], &h)
            .expect_err("ca");
        assert!(err.contains("proxy-ca"), "{err}");
    }

    #[test]
    fn header_values_and_escapes() {
        // Header names as the apiserver publishes them (`X-Remote-User`) match any case.
        let h = headers(&[("x-remote-user", "carol"), ("X-REMOTE-GROUP", "g")]);
        assert_eq!(
            first_value(&h, &["X-Remote-User".into()]).as_deref(),
            Some("carol")
        );
        assert_eq!(h.get_all("X-Remote-Group").iter().count(), 1);
        let h = headers(&[("a", ""), ("b", "second")]);
        assert_eq!(
            first_value(&h, &["a".into(), "b".into()]).as_deref(),
            Some("second")
        );
        assert_eq!(unescape("example.org%2Fkey"), "example.org/key");
        assert_eq!(unescape("bad%zzescape"), "bad%zzescape");
    }

    #[test]
    fn bad_ca_files_are_named() {
        let err = ClientCa::from_pem("--client-ca-file /x.pem", b"not pem").expect_err("bad");
        assert!(err.to_string().contains("--client-ca-file /x.pem"), "{err}");
    }
}
