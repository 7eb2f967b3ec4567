//! Google credentials as clusters hold them: the service-account JSON key file (what
//! `gcloud iam service-accounts keys create` writes) and the Application Default Credentials
//! search (`GOOGLE_APPLICATION_CREDENTIALS`, then gcloud's well-known file, then the metadata
//! server). A key signs a JWT (RS256, `kid` = `private_key_id`) that its `token_uri` exchanges
//! for an access token (RFC 7523 `jwt-bearer` grant). Upstream equivalent:
//! `golang.org/x/oauth2/google`'s `DefaultTokenSource` and `JWTConfigFromJSON`, which the
//! legacy provider uses for `token-url = nil`.
//!
//! The private key never leaves [`PrivateKey`]: its `Debug` is redacted and no error quotes
//! the file's contents, only its path and what is wrong with it.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hypercloud_cloudprovider::input::{self, MAX_INPUT_FILE_BYTES};
use ring::rand::SystemRandom;
use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::PrivateKeyDer;
use serde::Deserialize;

use crate::error::{Error, Result};

/// The scope asked for, as upstream's client asks (`compute.CloudPlatformScope`).
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The OAuth2 grant a signed JWT is exchanged with (RFC 7523).
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// How long an assertion is good for: Google refuses more than an hour.
const ASSERTION_LIFETIME_SECS: u64 = 3600;
/// The well-known file under gcloud's configuration directory.
const WELL_KNOWN_FILE: &str = "application_default_credentials.json";

/// An RSA private key, kept out of every `Debug`, log and error (boxed: ring's key pair is
/// large, and keys travel in enums).
pub struct PrivateKey(Box<RsaKeyPair>);

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKey(<redacted>)")
    }
}

/// A parsed service-account key file (`"type": "service_account"`).
#[derive(Debug)]
pub struct ServiceAccountKey {
    /// The service account (`iss` of the assertions).
    pub client_email: String,
    /// The key's ID (`kid` of the assertions).
    pub private_key_id: String,
    /// Where assertions are exchanged for access tokens.
    pub token_uri: String,
    /// The project the key was made in, when the file says.
    pub project_id: Option<String>,
    key: PrivateKey,
}

/// The fields of a key file that are read; the rest (`client_id`, `auth_uri`, certificate
/// URLs) are not needed to get a token.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    project_id: Option<String>,
    private_key_id: Option<String>,
    private_key: Option<String>,
    client_email: Option<String>,
    token_uri: Option<String>,
}

/// Google's token endpoint, when a key file names none (old files).
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

impl ServiceAccountKey {
    /// Reads the key file at `path`; `what` names where the path came from
    /// (`GOOGLE_APPLICATION_CREDENTIALS`).
    pub fn from_file(what: &str, path: &Path) -> Result<Self> {
        let bytes =
            input::read_named(what, path, MAX_INPUT_FILE_BYTES).map_err(Error::ReadCredentials)?;
        Self::parse(&bytes).map_err(|message| Error::Credentials {
            origin: format!("{what} {}", path.display()),
            message,
        })
    }

    /// Parses a key file's bytes. The error says what is wrong without quoting the file.
    pub fn parse(bytes: &[u8]) -> std::result::Result<Self, String> {
        let file: KeyFile = serde_json::from_slice(bytes).map_err(|e| {
            // serde's message may quote the input; only its class and place are repeated.
            format!(
                "not a JSON key file ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            )
        })?;
        match file.kind.as_deref() {
            Some("service_account") => {}
            Some("authorized_user") => {
                return Err("its type is authorized_user (a user's `gcloud auth application-default login`), which hypercloud does not read; give a service-account key (type service_account)".into())
            }
            Some("external_account" | "impersonated_service_account" | "external_account_authorized_user") => {
                return Err("its type is a federated or impersonated credential, which hypercloud does not read; give a service-account key (type service_account)".into())
            }
            Some(_) => return Err("its type is not service_account".into()),
            None => return Err("it has no \"type\" (want service_account)".into()),
        }
        let field = |v: Option<String>, name: &str| {
            v.filter(|s| !s.trim().is_empty())
                .ok_or_else(|| format!("it has no {name:?}"))
        };
        let client_email = field(file.client_email, "client_email")?;
        let private_key_id = field(file.private_key_id, "private_key_id")?;
        let pem = field(file.private_key, "private_key")?;
        let token_uri = file
            .token_uri
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| GOOGLE_TOKEN_URI.into());
        if !(token_uri.starts_with("https://") || token_uri.starts_with("http://")) {
            return Err("its token_uri is not an http(s) URL".into());
        }
        let key = match PrivateKeyDer::from_pem_slice(pem.as_bytes()) {
            Ok(PrivateKeyDer::Pkcs8(k)) => RsaKeyPair::from_pkcs8(k.secret_pkcs8_der()),
            Ok(PrivateKeyDer::Pkcs1(k)) => RsaKeyPair::from_der(k.secret_pkcs1_der()),
            Ok(_) => return Err("its private_key is not an RSA key (RS256 needs one)".into()),
            Err(_) => {
                return Err("its private_key is not an unencrypted PEM PRIVATE KEY block".into())
            }
        }
        .map_err(|e| format!("its private_key is not a usable RSA key ({e})"))?;
        Ok(ServiceAccountKey {
            client_email,
            private_key_id,
            token_uri,
            project_id: file.project_id.filter(|p| !p.is_empty()),
            key: PrivateKey(Box::new(key)),
        })
    }

    /// A signed assertion for `scope`, issued at `now` (seconds since the epoch).
    pub fn assertion(&self, scope: &str, now: u64) -> Result<String> {
        let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": self.private_key_id});
        let claims = serde_json::json!({
            "iss": self.client_email,
            "scope": scope,
            "aud": self.token_uri,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME_SECS,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0; self.key.0.public().modulus_len()];
        self.key
            .0
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signing_input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| Error::Credentials {
                origin: format!("the key of {}", self.client_email),
                message: "signing the assertion failed".into(),
            })?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

/// What the Application Default Credentials search found.
#[derive(Debug)]
pub enum Found {
    /// A service-account key file: where it was found (`GOOGLE_APPLICATION_CREDENTIALS
    /// /path`) and the key.
    KeyFile {
        /// The variable or well-known file, and the path.
        origin: String,
        /// The key.
        key: ServiceAccountKey,
    },
    /// No file: the metadata server's default service account, as on a GCE VM. `looked`
    /// says what was looked for first, for the error when the metadata server has no token
    /// either.
    Metadata {
        /// What was looked for.
        looked: String,
    },
}

/// The Application Default Credentials search, with the environment given by `env` (so tests
/// need not change the process's): `GOOGLE_APPLICATION_CREDENTIALS`, then
/// `$CLOUDSDK_CONFIG/application_default_credentials.json` (else
/// `$HOME/.config/gcloud/application_default_credentials.json`), then the metadata server.
/// A file that is named or exists but cannot be used is an error, as upstream: the search does
/// not go past it.
pub fn find_default_credentials(env: impl Fn(&str) -> Option<String>) -> Result<Found> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(path) = var("GOOGLE_APPLICATION_CREDENTIALS") {
        let key = ServiceAccountKey::from_file("GOOGLE_APPLICATION_CREDENTIALS", Path::new(&path))?;
        return Ok(Found::KeyFile {
            origin: format!("GOOGLE_APPLICATION_CREDENTIALS {path}"),
            key,
        });
    }
    let well_known: Option<PathBuf> = match var("CLOUDSDK_CONFIG") {
        Some(dir) => Some(Path::new(&dir).join(WELL_KNOWN_FILE)),
        None => var("HOME").map(|h| Path::new(&h).join(".config/gcloud").join(WELL_KNOWN_FILE)),
    };
    if let Some(path) = &well_known {
        if std::fs::symlink_metadata(path).is_ok() {
            let what = "the well-known credentials file";
            let key = ServiceAccountKey::from_file(what, path)?;
            return Ok(Found::KeyFile {
                origin: format!("{what} {}", path.display()),
                key,
            });
        }
    }
    Ok(Found::Metadata {
        looked: format!(
            "GOOGLE_APPLICATION_CREDENTIALS is unset and {}",
            well_known.map_or(
                "neither CLOUDSDK_CONFIG nor HOME is set".into(),
                |p| format!("{} does not exist", p.display())
            )
        ),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};
    use serde_json::{json, Value};

    /// A throw-away RSA key for these tests only (the Azure provider's test certificate's key).
    pub(crate) const TEST_KEY_PEM: &str = include_str!("../tests/fixtures/test-key.pem");

    pub(crate) fn key_file(email: &str, kid: &str, token_uri: &str) -> String {
        json!({
            "type": "service_account",
            "project_id": "demo",
            "private_key_id": kid,
            "private_key": TEST_KEY_PEM,
            "client_email": email,
            "client_id": "1234",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri,
        })
        .to_string()
    }

    fn part(jwt: &str, i: usize) -> Value {
        let p = jwt.split('.').nth(i).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
    }

    #[test]
    fn an_assertion_is_a_signed_rs256_jwt_with_googles_claims() {
        let key = ServiceAccountKey::parse(
            key_file(
                "sa@demo.iam.gserviceaccount.com",
                "k1",
                "http://127.0.0.1:1/token",
            )
            .as_bytes(),
        )
        .unwrap();
        let jwt = key.assertion(CLOUD_PLATFORM_SCOPE, 1_700_000_000).unwrap();
        assert_eq!(
            part(&jwt, 0),
            json!({"alg": "RS256", "typ": "JWT", "kid": "k1"})
        );
        assert_eq!(
            part(&jwt, 1),
            json!({"iss": "sa@demo.iam.gserviceaccount.com", "scope": CLOUD_PLATFORM_SCOPE,
                   "aud": "http://127.0.0.1:1/token", "iat": 1_700_000_000u64, "exp": 1_700_003_600u64})
        );
        let (signed, sig) = jwt.rsplit_once('.').unwrap();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.key.0.public().as_ref())
            .verify(signed.as_bytes(), &URL_SAFE_NO_PAD.decode(sig).unwrap())
            .unwrap();
    }

    #[test]
    fn the_private_key_is_never_shown() {
        let key =
            ServiceAccountKey::parse(key_file("a@b", "k", "https://x/token").as_bytes()).unwrap();
        let shown = format!("{key:?}");
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(!shown.contains("MII"), "{shown}");
    }

    #[test]
    fn bad_files_say_what_is_wrong_without_quoting_them() {
        let secret_body = key_file("a@b", "k", "https://x/token");
        let mut user = serde_json::from_str::<Value>(&secret_body).unwrap();
        user["type"] = json!("authorized_user");
        let mut bad_key = serde_json::from_str::<Value>(&secret_body).unwrap();
        bad_key["private_key"] =
            json!("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
        let mut no_email = serde_json::from_str::<Value>(&secret_body).unwrap();
        no_email.as_object_mut().unwrap().remove("client_email");
        for (bytes, want) in [
            (
                b"{\"private_key\": \"SECRET".to_vec(),
                "not a JSON key file",
            ),
            (b"[\"SECRET\"]".to_vec(), "not a JSON key file"),
            (user.to_string().into_bytes(), "authorized_user"),
            (bad_key.to_string().into_bytes(), "private_key"),
            (no_email.to_string().into_bytes(), "client_email"),
        ] {
            let e = ServiceAccountKey::parse(&bytes).unwrap_err();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("SECRET") && !e.contains("AAAA"), "{e}");
        }
    }

    #[test]
    fn default_credentials_are_searched_in_googles_order() {
        let dir = tempfile::tempdir().unwrap();
        let explicit = dir.path().join("explicit.json");
        std::fs::write(&explicit, key_file("env@p", "k1", "https://x/token")).unwrap();
        let sdk = dir.path().join("sdk");
        std::fs::create_dir_all(&sdk).unwrap();
        std::fs::write(
            sdk.join(WELL_KNOWN_FILE),
            key_file("sdk@p", "k2", "https://x/token"),
        )
        .unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".config/gcloud")).unwrap();
        std::fs::write(
            home.join(".config/gcloud").join(WELL_KNOWN_FILE),
            key_file("home@p", "k3", "https://x/token"),
        )
        .unwrap();
        let env_of = |pairs: Vec<(&'static str, PathBuf)>| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.display().to_string())
            }
        };
        let email = |f: Found| match f {
            Found::KeyFile { key, origin } => (key.client_email, origin),
            Found::Metadata { looked } => ("metadata".into(), looked),
        };
        let all = vec![
            ("GOOGLE_APPLICATION_CREDENTIALS", explicit.clone()),
            ("CLOUDSDK_CONFIG", sdk.clone()),
            ("HOME", home.clone()),
        ];
        let (who, origin) = email(find_default_credentials(env_of(all)).unwrap());
        assert_eq!(who, "env@p");
        assert!(origin.contains("explicit.json"), "{origin}");
        let (who, _) = email(
            find_default_credentials(env_of(vec![
                ("CLOUDSDK_CONFIG", sdk),
                ("HOME", home.clone()),
            ]))
            .unwrap(),
        );
        assert_eq!(who, "sdk@p");
        let (who, origin) = email(find_default_credentials(env_of(vec![("HOME", home)])).unwrap());
        assert_eq!(who, "home@p");
        assert!(origin.contains("well-known"), "{origin}");
        let empty = dir.path().join("empty");
        let (who, looked) = email(find_default_credentials(env_of(vec![("HOME", empty)])).unwrap());
        assert_eq!(who, "metadata");
        assert!(looked.contains("does not exist"), "{looked}");
        // A named file that is bad stops the search, naming the file.
        let bad = dir.path().join("bad.json");
        std::fs::write(
            &bad,
            "{\"type\": \"service_account\", \"private_key\": \"SECRET\"}",
        )
        .unwrap();
        let e = find_default_credentials(env_of(vec![("GOOGLE_APPLICATION_CREDENTIALS", bad)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.json") && !e.contains("SECRET"), "{e}");
        let e = find_default_credentials(env_of(vec![(
            "GOOGLE_APPLICATION_CREDENTIALS",
            dir.path().join("missing.json"),
        )]))
        .unwrap_err();
        assert!(
            hypercloud_cloudprovider::Chain(&e)
                .to_string()
                .contains("missing.json"),
            "{e}"
        );
    }
}
