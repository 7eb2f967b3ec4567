//! `--tls-min-version` and `--tls-cipher-suites` (upstream component-base `cliflag`'s
//! `TLSVersion` and `TLSCipherSuites`): Go's names, mapped to what rustls implements; a name
//! Go knows but rustls does not implement is refused with the reason, an unknown one as
//! upstream refuses it.

use rustls::crypto::ring::cipher_suite as cs;
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

/// `--tls-min-version`: the protocol versions served from it on; empty is rustls' default
/// (TLS 1.2 and 1.3, which is upstream's default minimum too).
pub fn min_version(name: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    match name {
        "" | "VersionTLS12" => Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]),
        "VersionTLS13" => Ok(vec![&rustls::version::TLS13]),
        "VersionTLS10" | "VersionTLS11" => Err(format!(
            "{name} is not supported: rustls implements TLS 1.2 and 1.3 only (TLS 1.0 and 1.1 are deprecated by RFC 8996); use VersionTLS12 or VersionTLS13"
        )),
        _ => Err(format!(
            "unknown tls version {name:?}: allowed values are VersionTLS12, VersionTLS13"
        )),
    }
}

/// Go's names of the suites rustls implements (Go's two spellings of the CHACHA20 ones).
const SUPPORTED: &[(&str, &SupportedCipherSuite)] = &[
    ("TLS_AES_128_GCM_SHA256", &cs::TLS13_AES_128_GCM_SHA256),
    ("TLS_AES_256_GCM_SHA384", &cs::TLS13_AES_256_GCM_SHA384),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        &cs::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        &cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        &cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        &cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        &cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        &cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        &cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        &cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        &cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// Suites upstream accepts that rustls does not implement (CBC, RC4, 3DES, RSA key exchange).
const NOT_IN_RUSTLS: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_RSA_WITH_RC4_128_SHA",
];

/// `--tls-cipher-suites`: the suites to offer, `None` for rustls' defaults (all it
/// implements). The list chooses among the TLS 1.2 suites; TLS 1.3 suites stay all enabled
/// unless the list names some of them (Go cannot restrict TLS 1.3 suites; rustls can, so a
/// TLS 1.3 name is honoured rather than ignored).
pub fn cipher_suites(names: &[String]) -> Result<Option<Vec<SupportedCipherSuite>>, String> {
    let names: Vec<&str> = names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
    for name in names {
        if let Some((_, suite)) = SUPPORTED.iter().find(|(n, _)| *n == name) {
            if !chosen.iter().any(|c| c.suite() == suite.suite()) {
                chosen.push(**suite);
            }
        } else if NOT_IN_RUSTLS.contains(&name) {
            return Err(format!(
                "cipher suite {name} is not supported: rustls implements only AEAD suites with forward secrecy ({})",
                supported_names().join(", ")
            ));
        } else {
            return Err(format!(
                "cipher suite {name} not supported or doesn't exist"
            ));
        }
    }
    if !chosen
        .iter()
        .any(|c| c.version() == &rustls::version::TLS13)
    {
        chosen.extend(
            rustls::crypto::ring::ALL_CIPHER_SUITES
                .iter()
                .filter(|c| c.version() == &rustls::version::TLS13)
                .copied(),
        );
    }
    Ok(Some(chosen))
}

/// The suite names accepted, for help texts and errors.
pub fn supported_names() -> Vec<&'static str> {
    SUPPORTED.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn versions() {
        assert_eq!(min_version("").expect("default").len(), 2);
        assert_eq!(min_version("VersionTLS12").expect("1.2").len(), 2);
        assert_eq!(
            min_version("VersionTLS13").expect("1.3"),
            [&rustls::version::TLS13]
        );
        let err = min_version("VersionTLS10").expect_err("1.0");
        assert!(
            err.starts_with("VersionTLS10 is not supported: rustls"),
            "{err}"
        );
        assert!(min_version("VersionTLS11").is_err());
        assert!(min_version("TLS12").expect_err("bad").contains("unknown"));
    }

    #[test]
    fn suites() {
        assert_eq!(cipher_suites(&[]).expect("none"), None);
        let chosen = cipher_suites(&list(&[
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        ]))
        .expect("ok")
        .expect("some");
        let tls12: Vec<_> = chosen
            .iter()
            .filter(|c| c.version() == &rustls::version::TLS12)
            .map(|c| c.suite())
            .collect();
        assert_eq!(
            tls12,
            [
                rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            ]
        );
        assert_eq!(chosen.len(), 5, "all three TLS 1.3 suites kept");
        let only13 = cipher_suites(&list(&["TLS_AES_256_GCM_SHA384"]))
            .expect("ok")
            .expect("some");
        assert_eq!(
            only13.iter().map(|c| c.suite()).collect::<Vec<_>>(),
            [rustls::CipherSuite::TLS13_AES_256_GCM_SHA384]
        );
        let err = cipher_suites(&list(&["TLS_RSA_WITH_AES_128_CBC_SHA"])).expect_err("cbc");
        assert!(
            err.contains("TLS_RSA_WITH_AES_128_CBC_SHA is not supported: rustls"),
            "{err}"
        );
        let err = cipher_suites(&list(&["NOPE"])).expect_err("unknown");
        assert_eq!(err, "cipher suite NOPE not supported or doesn't exist");
    }
}
