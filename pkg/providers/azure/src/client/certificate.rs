//! The client certificate credential (`aadClientCertPath`): azure_identity's
//! `ClientAssertionCredential` with an assertion signed here. azure_identity 1.0's own
//! `ClientCertificateCredential` needs OpenSSL (its `client_certificate` feature), which the
//! workspace refuses (deny.toml), so the assertion is made as azure-identity for Python makes
//! it (docs/azure-clients.md, a): a JWT with header `{"alg":"RS256","typ":"JWT","x5t":...}`
//! (`x5t` the padded base64url SHA-1 of the certificate), claims `aud` (the token endpoint),
//! `iss` = `sub` = the client ID, `jti`, `iat` and `exp` (10 minutes), signed
//! RSASSA-PKCS1-v1_5 SHA-256 with `ring`.
//!
//! The file is PEM: the certificate and its RSA private key (PKCS#8 or PKCS#1), as
//! `CertificateCredential` and `az login --certificate` read it. Upstream reads a PKCS#12
//! (`.pfx`) file; hypercloud does not yet, and says how to convert one.

use std::fmt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use azure_core::error::ErrorKind;
use azure_core::http::ClientMethodOptions;
use azure_identity::ClientAssertion;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hypercloud_cloudprovider::input::{self, MAX_INPUT_FILE_BYTES};
use ring::rand::SystemRandom;
use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha1::{Digest as _, Sha1};

use crate::error::{Error, Result};

/// How long an assertion is good for, as azure-identity makes them.
const LIFETIME_SECS: f64 = 600.0;

/// Signs client assertions with a certificate's key.
pub(crate) struct CertificateAssertion {
    client_id: String,
    audience: String,
    x5t: String,
    key: RsaKeyPair,
    rng: SystemRandom,
}

impl fmt::Debug for CertificateAssertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAssertion")
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .field("x5t", &self.x5t)
            .finish_non_exhaustive()
    }
}

impl CertificateAssertion {
    /// Reads the PEM file at `path` (`aadClientCertPath`).
    pub fn from_file(path: &Path, client_id: &str, audience: &str) -> Result<Self> {
        let pem = input::read_named("aadClientCertPath", path, MAX_INPUT_FILE_BYTES)
            .map_err(Error::ReadClientCertificate)?;
        Self::from_pem(&pem, &path.display().to_string(), client_id, audience)
    }

    /// From PEM bytes holding a certificate and its RSA key; `origin` names them in errors.
    pub fn from_pem(pem: &[u8], origin: &str, client_id: &str, audience: &str) -> Result<Self> {
        let err = |message: String| Error::ParseClientCertificate {
            path: origin.into(),
            message,
        };
        if !pem.windows(11).any(|w| w == b"-----BEGIN ") {
            return Err(err(
                "not PEM; a PKCS#12 (.pfx) file, upstream's format, is not read by hypercloud yet: \
                 convert it with `openssl pkcs12 -in cert.pfx -nodes -out cert.pem`"
                    .into(),
            ));
        }
        let cert = CertificateDer::pem_slice_iter(pem)
            .next()
            .ok_or_else(|| err("no CERTIFICATE block".into()))?
            .map_err(|e| err(format!("the CERTIFICATE block: {e}")))?;
        let key = match PrivateKeyDer::from_pem_slice(pem) {
            Ok(PrivateKeyDer::Pkcs8(k)) => RsaKeyPair::from_pkcs8(k.secret_pkcs8_der()),
            Ok(PrivateKeyDer::Pkcs1(k)) => RsaKeyPair::from_der(k.secret_pkcs1_der()),
            Ok(_) => return Err(err("the private key is not an RSA key (RS256 needs one)".into())),
            Err(e) => {
                return Err(err(format!(
                    "no unencrypted PRIVATE KEY or RSA PRIVATE KEY block ({e}); an encrypted key is not read"
                )))
            }
        }
        .map_err(|e| err(format!("the RSA private key: {e}")))?;
        Ok(CertificateAssertion {
            client_id: client_id.into(),
            audience: audience.into(),
            x5t: URL_SAFE.encode(Sha1::digest(cert.as_ref())),
            key,
            rng: SystemRandom::new(),
        })
    }

    /// A signed assertion issued at `now` (seconds since the epoch).
    pub fn sign(&self, now: f64) -> std::result::Result<String, ring::error::Unspecified> {
        let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "x5t": self.x5t});
        let claims = serde_json::json!({
            "aud": self.audience,
            "iss": self.client_id,
            "sub": self.client_id,
            "jti": uuid::Uuid::new_v4().to_string(),
            "iat": now,
            "exp": now + LIFETIME_SECS,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key.sign(
            &RSA_PKCS1_SHA256,
            &self.rng,
            signing_input.as_bytes(),
            &mut signature,
        )?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

#[async_trait::async_trait]
impl ClientAssertion for CertificateAssertion {
    async fn secret(&self, _: Option<ClientMethodOptions<'_>>) -> azure_core::Result<String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.sign(now).map_err(|_| {
            azure_core::Error::with_message(
                ErrorKind::Credential,
                "signing the client assertion with the certificate's key failed",
            )
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};

    /// A throw-away RSA key and self-signed certificate for this test only (made with
    /// `openssl req -x509 -newkey rsa:2048 -nodes`).
    const PEM: &str = include_str!("../../tests/fixtures/client-cert.pem");

    fn part(jwt: &str, i: usize) -> serde_json::Value {
        let p = jwt.split('.').nth(i).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
    }

    #[test]
    fn the_assertion_is_rs256_with_x5t_and_verifies_with_the_key() {
        let a = CertificateAssertion::from_pem(
            PEM.as_bytes(),
            "client.pem",
            "client-1",
            "https://127.0.0.1:1/t/oauth2/v2.0/token",
        )
        .unwrap();
        let jwt = a.sign(1_795_837_728.5).unwrap();
        let h = part(&jwt, 0);
        assert_eq!(
            (h["alg"].as_str(), h["typ"].as_str()),
            (Some("RS256"), Some("JWT"))
        );
        let cert = CertificateDer::pem_slice_iter(PEM.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        let x5t = h["x5t"].as_str().unwrap();
        assert!(x5t.ends_with('='), "padded, as azure-identity: {x5t}");
        assert_eq!(
            URL_SAFE.decode(x5t).unwrap(),
            Sha1::digest(cert.as_ref()).to_vec()
        );
        let c = part(&jwt, 1);
        assert_eq!(c["aud"], "https://127.0.0.1:1/t/oauth2/v2.0/token");
        assert_eq!(
            (c["iss"].as_str(), c["sub"].as_str()),
            (Some("client-1"), Some("client-1"))
        );
        assert_eq!(
            c["exp"].as_f64().unwrap() - c["iat"].as_f64().unwrap(),
            600.0
        );
        assert!(c["jti"].as_str().is_some_and(|j| j.len() == 36));
        let (signed, sig) = jwt.rsplit_once('.').unwrap();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, a.key.public().as_ref())
            .verify(signed.as_bytes(), &URL_SAFE_NO_PAD.decode(sig).unwrap())
            .expect("the signature verifies with the certificate's key");
    }

    #[test]
    fn files_it_cannot_use_are_named_with_the_reason() {
        let e = CertificateAssertion::from_pem(b"\x30\x82\x01\x00pfx", "c.pfx", "c", "a")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.pfx") && e.contains("PKCS#12") && e.contains("openssl pkcs12"),
            "{e}"
        );
        let cert_only: String = PEM
            .split_inclusive('\n')
            .take_while(|l| !l.contains("BEGIN PRIVATE KEY"))
            .collect();
        let e = CertificateAssertion::from_pem(cert_only.as_bytes(), "c.pem", "c", "a")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no unencrypted PRIVATE KEY"), "{e}");
        let e = CertificateAssertion::from_file(Path::new("/nonexistent/hc/c.pem"), "c", "a")
            .unwrap_err();
        assert!(matches!(e, Error::ReadClientCertificate(_)), "{e:?}");
    }
}
