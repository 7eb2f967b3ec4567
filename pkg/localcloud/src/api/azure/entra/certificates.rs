//! The certificates registered for Entra clients: what an app registration's `keyCredentials`
//! are to Entra (uploaded with `az ad app credential reset --cert`). The operator registers a
//! client's public certificate with `hypercloud local-cloud entra-certificate add CLIENT_ID
//! FILE`; it is kept as PEM in `<state-dir>/azure-client-certificates/<client-id>.pem` (the
//! client ID as Keystone writes it: 32 hex digits, no hyphens), one file per client, any number
//! of certificates in it. The token endpoint reads the client's file at each certificate
//! sign-in, so a registration needs no restart and works whether or not a server runs. Only
//! certificates are kept: a private key in the given file is left out.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::{Error, Result};

/// The registry's directory under the state directory.
pub(crate) const DIR: &str = "azure-client-certificates";

/// The smallest RSA key accepted: ring verifies 2048 to 8192 bits, as Entra accepts.
const MIN_RSA_BITS: usize = 2048;
const MAX_RSA_BITS: usize = 8192;

/// A registered client certificate, with what checking an assertion needs of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientCertificate {
    /// The certificate, DER.
    pub der: Vec<u8>,
    /// SHA-1 of the DER: the thumbprint (`x5t`).
    pub sha1: Vec<u8>,
    /// SHA-256 of the DER (`x5t#S256`).
    pub sha256: Vec<u8>,
    pub subject: String,
    /// Validity, seconds since the epoch.
    pub not_before: i64,
    pub not_after: i64,
    /// The RSA public key (PKCS#1 `RSAPublicKey`, DER), as ring verifies with it.
    pub rsa_public_key: Vec<u8>,
}

impl ClientCertificate {
    /// Parses a DER certificate; only RSA keys of 2048 to 8192 bits can sign assertions
    /// (RS256, PS256).
    pub(crate) fn parse(der: &[u8]) -> std::result::Result<Self, String> {
        let (rest, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| format!("not an X.509 certificate: {e}"))?;
        if !rest.is_empty() {
            return Err("trailing bytes after the certificate".into());
        }
        let spki = cert.public_key();
        let bits = match spki.parsed() {
            Ok(x509_parser::public_key::PublicKey::RSA(rsa)) => rsa.key_size(),
            _ => {
                return Err(
                    "its public key is not RSA; Entra's client assertions are RS256 or PS256"
                        .into(),
                )
            }
        };
        if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
            return Err(format!(
                "its RSA key has {bits} bits; {MIN_RSA_BITS} to {MAX_RSA_BITS} are accepted"
            ));
        }
        let digest = |alg| ring::digest::digest(alg, der).as_ref().to_vec();
        Ok(ClientCertificate {
            der: der.to_vec(),
            sha1: digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY),
            sha256: digest(&ring::digest::SHA256),
            subject: cert.subject().to_string(),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            rsa_public_key: spki.subject_public_key.data.to_vec(),
        })
    }

    /// `x5t` as MSAL sends it: base64url of the SHA-1 thumbprint, with `=` padding.
    pub(crate) fn x5t(&self) -> String {
        URL_SAFE.encode(&self.sha1)
    }

    /// The thumbprint as Azure shows it: SHA-1 in upper-case hex.
    pub(crate) fn thumbprint(&self) -> String {
        hex_upper(&self.sha1)
    }

    fn pem(&self) -> String {
        let b64 = STANDARD.encode(&self.der);
        let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
        out
    }
}

/// Upper-case hex.
pub(crate) fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// A client ID in the registry's form (Keystone's: 32 lower-case hex digits), from a GUID or
/// a Keystone ID; `None` for anything else (which also keeps paths out of file names).
pub(crate) fn client_key(client_id: &str) -> Option<String> {
    let key = super::super::unguid(client_id);
    (key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit())).then_some(key)
}

/// The file of a client's certificates.
fn file(state_dir: &Path, key: &str) -> PathBuf {
    state_dir.join(DIR).join(format!("{key}.pem"))
}

/// The certificates in PEM text, and whether it also held a private key.
pub(crate) fn parse_pem(pem: &[u8]) -> std::result::Result<(Vec<ClientCertificate>, bool), String> {
    let ders: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("not PEM: {e}"))?;
    let certs = ders
        .iter()
        .enumerate()
        .map(|(i, der)| {
            ClientCertificate::parse(der.as_ref())
                .map_err(|e| format!("certificate {}: {e}", i + 1))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((certs, PrivateKeyDer::from_pem_slice(pem).is_ok()))
}

/// The certificates registered for `client_id` (none when it has no file, or is no client ID).
pub(crate) fn registered(state_dir: &Path, client_id: &str) -> Result<Vec<ClientCertificate>> {
    let Some(key) = client_key(client_id) else {
        return Ok(Vec::new());
    };
    read(&file(state_dir, &key))
}

fn read(path: &Path) -> Result<Vec<ClientCertificate>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let pem = hypercloud_cloudprovider::input::read_named(
        "a registered client certificate file",
        path,
        hypercloud_cloudprovider::input::MAX_INPUT_FILE_BYTES,
    )?;
    let (certs, _) = parse_pem(&pem).map_err(|reason| Error::ClientCertificate {
        path: path.to_owned(),
        reason,
    })?;
    Ok(certs)
}

fn write(path: &Path, certs: &[ClientCertificate]) -> Result<()> {
    let failed = |source| Error::WriteFile {
        path: path.to_owned(),
        source,
    };
    if certs.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(failed(e)),
            _ => Ok(()),
        };
    }
    let pem: String = certs.iter().map(ClientCertificate::pem).collect();
    crate::store::write_atomic(path, pem.as_bytes()).map_err(failed)
}

/// What [`add`] did.
#[derive(Debug)]
pub(crate) struct Added {
    /// The certificates of the file, each with whether it was new to the client.
    pub certificates: Vec<(ClientCertificate, bool)>,
    /// The file held a private key, which was not kept.
    pub left_out_private_key: bool,
}

/// Registers the certificates of the PEM file `source` for `client_id` (GUID or Keystone form);
/// ones already registered stay as they are.
pub(crate) fn add(state_dir: &Path, client_id: &str, source: &Path) -> Result<Added> {
    let key = client_key(client_id).ok_or_else(|| Error::ParseFlag {
        flag: "CLIENT_ID",
        value: client_id.to_owned(),
        reason:
            "a client ID is a GUID or 32 hex digits (an application credential's or a user's ID)"
                .into(),
    })?;
    let pem = hypercloud_cloudprovider::input::read_named(
        "the certificate file",
        source,
        hypercloud_cloudprovider::input::MAX_INPUT_FILE_BYTES,
    )?;
    let invalid = |reason| Error::ClientCertificate {
        path: source.to_owned(),
        reason,
    };
    let (given, left_out_private_key) = parse_pem(&pem).map_err(invalid)?;
    if given.is_empty() {
        return Err(invalid("no PEM certificate in the file".into()));
    }
    let path = file(state_dir, &key);
    let mut certs = read(&path)?;
    let mut certificates = Vec::new();
    for c in given {
        let new = !certs.iter().any(|k| k.sha1 == c.sha1);
        if new {
            certs.push(c.clone());
        }
        certificates.push((c, new));
    }
    std::fs::create_dir_all(state_dir.join(DIR)).map_err(|source| Error::WriteFile {
        path: state_dir.join(DIR),
        source,
    })?;
    write(&path, &certs)?;
    Ok(Added {
        certificates,
        left_out_private_key,
    })
}

/// Unregisters `client_id`'s certificate whose thumbprint (hex SHA-1, or `x5t`) is given, or
/// all of them; the certificates removed.
pub(crate) fn remove(
    state_dir: &Path,
    client_id: &str,
    thumbprint: Option<&str>,
) -> Result<Vec<ClientCertificate>> {
    let Some(key) = client_key(client_id) else {
        return Ok(Vec::new());
    };
    let path = file(state_dir, &key);
    let (gone, kept): (Vec<_>, Vec<_>) = read(&path)?.into_iter().partition(|c| {
        thumbprint.is_none_or(|t| {
            t.eq_ignore_ascii_case(&c.thumbprint())
                || t.trim_end_matches('=') == c.x5t().trim_end_matches('=')
        })
    });
    if !gone.is_empty() {
        write(&path, &kept)?;
    }
    Ok(gone)
}

/// Every registered certificate, by client ID (Keystone form), sorted by client.
pub(crate) fn list(state_dir: &Path) -> Result<Vec<(String, ClientCertificate)>> {
    let dir = state_dir.join(DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::ReadSnapshot { path: dir, source }),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::ReadSnapshot {
            path: dir.clone(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(key) = name.strip_suffix(".pem").and_then(client_key) else {
            continue;
        };
        for c in read(&entry.path())? {
            out.push((key.clone(), c));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_guids_or_keystone_ids() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(client_key(hex).as_deref(), Some(hex));
        assert_eq!(
            client_key("01234567-89AB-CDEF-0123-456789ABCDEF").as_deref(),
            Some(hex)
        );
        for bad in ["", "../etc/passwd", "0123", &"g".repeat(32), "x/y"] {
            assert_eq!(client_key(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn certificates_that_cannot_sign_assertions_are_refused_by_reason() {
        // rcgen with ring makes ECDSA keys only: a certificate Entra could not check.
        let ec = rcgen::generate_simple_self_signed(vec!["client".to_owned()]).unwrap();
        let e = parse_pem(ec.cert.pem().as_bytes()).unwrap_err();
        assert!(e.contains("not RSA"), "{e}");
        let e = parse_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
            .unwrap_err();
        assert!(e.contains("certificate 1"), "{e}");
        assert_eq!(parse_pem(b"no pem here").unwrap().0, vec![]);
    }
}
