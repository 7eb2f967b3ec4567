//! `--tls-sni-cert-key` (upstream component-base `cliflag.NamedCertKey` and the apiserver's
//! SNI certificate selection): extra certificates chosen by the name the client asks for.
//! An exact name beats a wildcard (`*.example.com` covers one label); names given on the flag
//! beat names read from a certificate (its CommonName, when it is a domain, and DNS SANs); of
//! pairs claiming the same name the first wins; any other name gets the default certificate.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::CertificateDer;

/// One `--tls-sni-cert-key` value.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedCertKey {
    /// Certificate chain (PEM).
    pub cert: PathBuf,
    /// Private key (PEM).
    pub key: PathBuf,
    /// Domain patterns; empty: the certificate's names.
    pub names: Vec<String>,
}

impl std::str::FromStr for NamedCertKey {
    type Err = String;

    /// `cert,key` or `cert,key:name1,name2` (upstream's syntax).
    fn from_str(value: &str) -> Result<Self, String> {
        let (pair, names) = match value.split_once(':') {
            Some((pair, names)) => {
                let names = names.trim();
                if names.is_empty() {
                    return Err("empty names list is not allowed".into());
                }
                (
                    pair.trim(),
                    names.split(',').map(|n| n.trim().to_string()).collect(),
                )
            }
            None => (value.trim(), Vec::new()),
        };
        let files: Vec<&str> = pair.split(',').map(str::trim).collect();
        let [cert, key] = files[..] else {
            return Err("expected comma separated certificate and key file paths".into());
        };
        if cert.is_empty() || key.is_empty() {
            return Err("expected comma separated certificate and key file paths".into());
        }
        Ok(Self {
            cert: cert.into(),
            key: key.into(),
            names,
        })
    }
}

/// Picks the certificate by SNI name, else the default.
#[derive(Debug)]
pub struct SniResolver {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
}

impl SniResolver {
    /// `named`: each pair's certificate and the names it was given on the flag (empty: read
    /// from the certificate), in flag order.
    pub fn new(
        default: Arc<CertifiedKey>,
        named: Vec<(Arc<CertifiedKey>, Vec<String>)>,
    ) -> Result<Self, String> {
        let mut by_name = HashMap::new();
        // Implicit names first, then explicit ones over them; each in reverse, so earlier
        // pairs win (upstream `getNamedCertificateMap`).
        for (key, names) in named.iter().rev() {
            if names.is_empty() {
                let leaf = key
                    .cert
                    .first()
                    .ok_or_else(|| "certificate chain is empty".to_string())?;
                for n in certificate_names(leaf)? {
                    by_name.insert(n.to_ascii_lowercase(), key.clone());
                }
            }
        }
        for (key, names) in named.iter().rev() {
            for n in names {
                by_name.insert(n.to_ascii_lowercase(), key.clone());
            }
        }
        Ok(Self { default, by_name })
    }

    fn select(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = server_name.map(str::to_ascii_lowercase) else {
            return self.default.clone();
        };
        if let Some(k) = self.by_name.get(&name) {
            return k.clone();
        }
        if let Some((_, rest)) = name.split_once('.') {
            if let Some(k) = self.by_name.get(&format!("*.{rest}")) {
                return k.clone();
            }
        }
        self.default.clone()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.select(hello.server_name()))
    }
}

/// A certificate's SNI names: its CommonName if that is a domain (not an IP), and its DNS
/// SANs (IPs never: SNI carries no IPs).
fn certificate_names(cert: &CertificateDer<'_>) -> Result<Vec<String>, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("parsing certificate: {e}"))?;
    let mut names = Vec::new();
    if let Some(cn) = parsed
        .subject()
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
    {
        let domain = cn.strip_prefix("*.").unwrap_or(cn);
        let is_domain = cn == "*"
            || (!domain.is_empty()
                && domain.parse::<std::net::IpAddr>().is_err()
                && domain.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                }));
        if is_domain {
            names.push(cn.to_string());
        }
    }
    if let Ok(Some(san)) = parsed.subject_alternative_name() {
        for n in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = n {
                names.push(d.to_string());
            }
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(names: &[&str], cn: &str) -> Arc<CertifiedKey> {
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let kp = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&kp).expect("cert");
        let der = rustls_pki_types::PrivateKeyDer::try_from(kp.serialize_der()).expect("der");
        Arc::new(CertifiedKey::new(
            vec![cert.der().clone()],
            rustls::crypto::ring::sign::any_supported_type(&der).expect("signing key"),
        ))
    }

    #[test]
    fn flag_syntax_is_upstreams() {
        let n: NamedCertKey = "a.crt, a.key".parse().expect("pair");
        assert_eq!(
            (n.cert.to_str(), n.key.to_str()),
            (Some("a.crt"), Some("a.key"))
        );
        assert!(n.names.is_empty());
        let n: NamedCertKey = "a.crt,a.key:*.foo.com, foo.com".parse().expect("names");
        assert_eq!(n.names, ["*.foo.com", "foo.com"]);
        assert!("a.crt,a.key:".parse::<NamedCertKey>().is_err());
        assert!("a.crt".parse::<NamedCertKey>().is_err());
        assert!("a,b,c".parse::<NamedCertKey>().is_err());
    }

    #[test]
    fn exact_beats_wildcard_explicit_beats_implicit_first_wins() {
        let default = key(&["localhost"], "default");
        let implicit = key(&["api.example.com", "10.0.0.1"], "implicit.example.com");
        let wildcard = key(&[], "w");
        let explicit = key(&[], "e");
        let later = key(&[], "l");
        let r = SniResolver::new(
            default.clone(),
            vec![
                (implicit.clone(), vec![]),
                (wildcard.clone(), vec!["*.example.com".into()]),
                (explicit.clone(), vec!["Implicit.example.com".into()]),
                (later.clone(), vec!["*.example.com".into()]),
            ],
        )
        .expect("resolver");
        let is = |name: Option<&str>, want: &Arc<CertifiedKey>| {
            assert!(Arc::ptr_eq(&r.select(name), want), "{name:?}");
        };
        is(Some("api.example.com"), &implicit);
        is(Some("API.Example.com"), &implicit);
        is(Some("implicit.example.com"), &explicit);
        is(Some("other.example.com"), &wildcard);
        is(Some("a.b.example.com"), &default);
        is(Some("10.0.0.1"), &default);
        is(None, &default);
    }
}
