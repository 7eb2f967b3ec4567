//! `--tls-self-signed`: the cloud makes its own CA, keeps it in the state directory across
//! restarts, and serves a certificate it signs; a client that trusts only the CA file connects,
//! and so does the operator CLI (through `server.json`).

use std::path::Path;

use clap::Parser;
use hypercloud_localcloud::{Server, ServerConfig};
use reqwest::StatusCode;

/// A client that trusts `ca` (PEM) and nothing else.
fn trusting(ca: &[u8]) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca).unwrap())
        .build()
        .unwrap()
}

fn self_signed(state: &Path) -> ServerConfig {
    ServerConfig {
        tls_self_signed: true,
        ..ServerConfig::ephemeral(state)
    }
}

async fn identity_status(http: &reqwest::Client, url: &str) -> reqwest::Result<StatusCode> {
    Ok(http
        .get(format!("{url}/identity/v3"))
        .send()
        .await?
        .status())
}

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    args: hypercloud_localcloud::LocalCloudArgs,
}

#[tokio::test]
async fn the_clouds_own_ca_is_trusted_and_kept_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let handle = Server::bind(self_signed(&state)).await.unwrap();
    let url = handle.api_url().to_owned();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let ca_file = handle.tls_ca_file().unwrap().to_owned();
    assert_eq!(ca_file, state.join("tls/ca.pem"));
    let ca = std::fs::read(&ca_file).unwrap();
    assert_eq!(
        identity_status(&trusting(&ca), &url).await.unwrap(),
        StatusCode::OK
    );
    // Nothing else is trusted: the built-in roots do not know the CA.
    assert!(identity_status(&reqwest::Client::new(), &url)
        .await
        .is_err());
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    assert!(
        identity_status(&trusting(other.cert.pem().as_bytes()), &url)
            .await
            .is_err(),
        "a client trusting another CA connected"
    );
    #[cfg(unix)]
    for key in ["tls/ca-key.pem", "tls/server-key.pem"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(state.join(key))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{key} is readable by others: {mode:o}");
    }
    // The operator CLI trusts the CA named in server.json.
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("server.json")).unwrap()).unwrap();
    assert_eq!(info["tls_ca_file"], ca_file.display().to_string());
    let cli = Cli::try_parse_from([
        "local-cloud",
        "--state-dir",
        state.to_str().unwrap(),
        "instance",
        "list",
    ])
    .unwrap();
    hypercloud_localcloud::run(cli.args).await.unwrap();
    let serving = std::fs::read(state.join("tls/server.pem")).unwrap();
    handle.shutdown().await.unwrap();

    // A restart keeps the CA (clients keep trusting the same file) and signs a new serving
    // certificate with it.
    let handle = Server::bind(self_signed(&state)).await.unwrap();
    assert_eq!(std::fs::read(&ca_file).unwrap(), ca, "the CA changed");
    assert_ne!(
        std::fs::read(state.join("tls/server.pem")).unwrap(),
        serving
    );
    assert_eq!(
        identity_status(&trusting(&ca), handle.api_url())
            .await
            .unwrap(),
        StatusCode::OK
    );
    handle.shutdown().await.unwrap();

    // Half a CA is an error naming the missing file, not a new CA clients would not trust.
    std::fs::remove_file(state.join("tls/ca-key.pem")).unwrap();
    let err = Server::bind(self_signed(&state)).await.unwrap_err();
    assert!(err.to_string().contains("ca-key.pem"), "{err}");
    assert!(std::fs::read(&ca_file).unwrap() == ca);
}

#[tokio::test]
async fn self_signed_and_given_files_contradict() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = self_signed(&dir.path().join("state"));
    config.tls = Some(hypercloud_localcloud::TlsFiles {
        cert_file: dir.path().join("c.pem"),
        key_file: dir.path().join("k.pem"),
    });
    let err = Server::bind(config).await.unwrap_err().to_string();
    assert!(err.contains("tls_self_signed"), "{err}");
}
