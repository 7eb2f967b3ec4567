//! Entra's certificate credentials: a certificate registered for a client with
//! `local-cloud entra-certificate add` signs client assertions (RS256 with `x5t`, as
//! azure-identity's CertificateCredential sends them, and PS256 with `x5t#S256`, as raw MSAL
//! does) that get access tokens Resource Manager accepts; every refusal carries its AADSTS code.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine as _;
use clap::Parser;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::azure::{guid, start, Azure, JWT_BEARER, TENANT, V};

/// An RSA client certificate, as Entra's assertions need (RS256).
pub struct ClientCert {
    /// The certificate alone.
    pub cert_file: PathBuf,
    /// The certificate and its key: the file CertificateCredential reads.
    pub cert_and_key: PathBuf,
    pub der: Vec<u8>,
    pub key: ring::signature::RsaKeyPair,
}

/// Makes a new RSA key (`openssl genpkey`: ring, under rcgen, cannot make RSA keys) and a
/// self-signed certificate for it (rcgen), in `dir` as `<name>.pem` and `<name>-key.pem`.
pub fn client_cert(dir: &Path, name: &str) -> ClientCert {
    let key_file = dir.join(format!("{name}-only-key.pem"));
    let out = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&key_file)
        .output()
        .expect("openssl (to make an RSA key)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key_pem = std::fs::read_to_string(&key_file).unwrap();
    let key_pair = rcgen::KeyPair::from_pem(&key_pem).unwrap();
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let cert = params.self_signed(&key_pair).unwrap();
    let cert_file = dir.join(format!("{name}.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    let cert_and_key = dir.join(format!("{name}-key.pem"));
    std::fs::write(&cert_and_key, format!("{}{key_pem}", cert.pem())).unwrap();
    ClientCert {
        cert_file,
        cert_and_key,
        der: cert.der().to_vec(),
        key: ring::signature::RsaKeyPair::from_pkcs8(key_pair.serialized_der()).unwrap(),
    }
}

/// `hypercloud local-cloud --state-dir STATE ARGS...`, in process.
pub async fn local_cloud(state: &Path, args: &[&str]) -> hypercloud_localcloud::Result<()> {
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: hypercloud_localcloud::LocalCloudArgs,
    }
    let mut argv = vec!["local-cloud", "--state-dir", state.to_str().unwrap()];
    argv.extend_from_slice(args);
    hypercloud_localcloud::run(Cli::try_parse_from(argv).unwrap().args).await
}

fn digest(alg: &'static ring::digest::Algorithm, der: &[u8]) -> Vec<u8> {
    ring::digest::digest(alg, der).as_ref().to_vec()
}

/// A client assertion signed by `key`, naming `cert`, as MSAL makes it (`ps256`: raw MSAL's
/// PS256 with `x5t#S256`, else azure-identity's RS256 with a padded `x5t`).
fn assertion(signer: &ClientCert, named: &ClientCert, ps256: bool, claims: &Value) -> String {
    let header = if ps256 {
        json!({"alg": "PS256", "typ": "JWT",
               "x5t#S256": URL_SAFE.encode(digest(&ring::digest::SHA256, &named.der))})
    } else {
        json!({"alg": "RS256", "typ": "JWT",
               "x5t": URL_SAFE.encode(digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &named.der))})
    };
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let encoding: &'static dyn ring::signature::RsaEncoding = if ps256 {
        &ring::signature::RSA_PSS_SHA256
    } else {
        &ring::signature::RSA_PKCS1_SHA256
    };
    let mut sig = vec![0; signer.key.public().modulus_len()];
    signer
        .key
        .sign(
            encoding,
            &ring::rand::SystemRandom::new(),
            signed.as_bytes(),
            &mut sig,
        )
        .unwrap();
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig))
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The claims azure-identity 1.27 sends: float times, no `nbf`.
fn claims(az: &Azure, client: &str) -> Value {
    let t = now();
    json!({"aud": format!("{}/{TENANT}/oauth2/v2.0/token", az.url), "iss": client, "sub": client,
           "exp": t + 600.0, "iat": t, "jti": uuid::Uuid::new_v4().to_string()})
}

async fn sign_in(az: &Azure, client: &str, jwt: &str) -> crate::azure::Answer {
    az.token_form(
        TENANT,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", client),
            ("client_info", "1"),
            ("client_assertion", jwt),
            ("client_assertion_type", JWT_BEARER),
            ("scope", "https://management.azure.com/.default"),
        ],
    )
    .await
}

fn refused(a: &crate::azure::Answer, status: u16, code: &str, says: &str) {
    assert_eq!(a.status.as_u16(), status, "{}", a.body);
    let d = a.body["error_description"].as_str().unwrap();
    assert!(d.starts_with(&format!("AADSTS{code}:")), "{d}");
    assert!(d.contains(says), "{d}");
    assert_eq!(a.body["error_codes"][0].to_string(), code);
}

#[tokio::test]
async fn a_registered_certificate_signs_in_and_every_refusal_has_its_code() {
    let az = start().await;
    let dir = tempfile::tempdir().unwrap();
    let mine = client_cert(dir.path(), "hypercloud-sp");
    let other = client_cert(dir.path(), "not-registered");
    let user = guid(&az.user_id().await);

    // Not registered yet.
    let jwt = assertion(&mine, &mine, false, &claims(&az, &user));
    refused(
        &sign_in(&az, &user, &jwt).await,
        401,
        "700027",
        "not registered",
    );
    // Registered from the cert+key file a client holds: only the certificate is kept.
    local_cloud(
        &az.state,
        &[
            "entra-certificate",
            "add",
            &user,
            mine.cert_and_key.to_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    let kept = std::fs::read_to_string(
        az.state
            .join("azure-client-certificates")
            .join(format!("{}.pem", user.replace('-', ""))),
    )
    .unwrap();
    assert!(
        kept.contains("BEGIN CERTIFICATE") && !kept.contains("PRIVATE KEY"),
        "{kept}"
    );
    local_cloud(&az.state, &["entra-certificate", "list", "-o", "json"])
        .await
        .unwrap();

    // azure-identity's RS256 assertion, and raw MSAL's PS256 one, get tokens ARM accepts.
    for ps256 in [false, true] {
        let jwt = assertion(&mine, &mine, ps256, &claims(&az, &user));
        let a = sign_in(&az, &user, &jwt).await;
        assert_eq!(a.status, StatusCode::OK, "ps256={ps256}: {}", a.body);
        let token = a.body["access_token"].as_str().unwrap();
        let subs = az
            .call(
                Method::GET,
                &format!("/subscriptions?{V}"),
                Some(token),
                None,
            )
            .await;
        assert_eq!(subs.status, StatusCode::OK, "{}", subs.body);
        assert_eq!(subs.body["value"].as_array().unwrap().len(), 1);
    }

    // Refusals, each with Entra's code.
    let good = claims(&az, &user);
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let cases: Vec<(String, u16, &str, &str)> = vec![
        (
            assertion(&other, &other, false, &good),
            401,
            "700027",
            "not registered",
        ),
        (
            assertion(&other, &mine, false, &good),
            401,
            "700027",
            "signature",
        ),
        (
            assertion(&mine, &mine, false, &with("exp", json!(now() - 900.0))),
            401,
            "700024",
            "valid time range",
        ),
        (
            assertion(&mine, &mine, false, &with("iat", json!(now() + 900.0))),
            401,
            "700024",
            "valid time range",
        ),
        (
            assertion(
                &mine,
                &mine,
                false,
                &with(
                    "aud",
                    json!(format!(
                        "https://login.microsoftonline.com/{TENANT}/oauth2/v2.0/token"
                    )),
                ),
            ),
            401,
            "700023",
            "audience",
        ),
        (
            assertion(&mine, &mine, false, &with("iss", json!("someone-else"))),
            401,
            "700021",
            "client_id",
        ),
        ("x.y".to_owned(), 400, "50027", "malformed"),
    ];
    for (jwt, status, code, says) in &cases {
        refused(&sign_in(&az, &user, jwt).await, *status, code, says);
    }
    // A tampered claim breaks the signature.
    let jwt = assertion(&mine, &mine, false, &good);
    let mut parts: Vec<String> = jwt.split('.').map(str::to_owned).collect();
    parts[1] = URL_SAFE_NO_PAD.encode(with("jti", json!("tampered")).to_string());
    refused(
        &sign_in(&az, &user, &parts.join(".")).await,
        401,
        "700027",
        "signature",
    );
    // An unknown client is unknown, whatever it signs.
    let nobody = "00000000-0000-0000-0000-000000000001";
    let jwt = assertion(&mine, &mine, false, &claims(&az, nobody));
    refused(&sign_in(&az, nobody, &jwt).await, 400, "700016", nobody);

    // An application credential is a client too: its own certificate, its project.
    let keystone = az
        .http
        .post(format!("{}/identity/v3/auth/tokens", az.url))
        .json(&json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}}, "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}}))
        .send()
        .await
        .unwrap();
    let subject = keystone.headers()["x-subject-token"]
        .to_str()
        .unwrap()
        .to_owned();
    let made: Value = az
        .http
        .post(format!(
            "{}/identity/v3/users/{}/application_credentials",
            az.url,
            user.replace('-', "")
        ))
        .header("x-auth-token", subject)
        .json(&json!({"application_credential": {"name": "sp"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let app = guid(made["application_credential"]["id"].as_str().unwrap());
    let app_cert = client_cert(dir.path(), "app");
    local_cloud(
        &az.state,
        &[
            "entra-certificate",
            "add",
            &app,
            app_cert.cert_file.to_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    let jwt = assertion(&app_cert, &app_cert, false, &claims(&az, &app));
    let a = sign_in(&az, &app, &jwt).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    // The user's certificate is not the application's.
    let jwt = assertion(&mine, &mine, false, &claims(&az, &app));
    refused(
        &sign_in(&az, &app, &jwt).await,
        401,
        "700027",
        "not registered",
    );

    // Removed, the certificate signs nothing more.
    local_cloud(&az.state, &["entra-certificate", "remove", &user])
        .await
        .unwrap();
    let jwt = assertion(&mine, &mine, false, &claims(&az, &user));
    refused(
        &sign_in(&az, &user, &jwt).await,
        401,
        "700027",
        "not registered",
    );
    assert!(
        local_cloud(&az.state, &["entra-certificate", "remove", &user])
            .await
            .is_err(),
        "nothing left to remove"
    );
    // What cannot be registered is refused with its reason.
    let ec = dir.path().join("ec.pem");
    std::fs::write(
        &ec,
        rcgen::generate_simple_self_signed(vec!["ec".to_owned()])
            .unwrap()
            .cert
            .pem(),
    )
    .unwrap();
    let e = local_cloud(
        &az.state,
        &["entra-certificate", "add", &user, ec.to_str().unwrap()],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("not RSA"), "{e}");
    let e = local_cloud(
        &az.state,
        &[
            "entra-certificate",
            "add",
            "../../etc",
            mine.cert_file.to_str().unwrap(),
        ],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("CLIENT_ID"), "{e}");
    az.handle.shutdown().await.unwrap();
}
