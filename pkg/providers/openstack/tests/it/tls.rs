//! `[Global] ca-file` and `tls-insecure` against the local cloud serving its API over TLS.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use hypercloud_cloudprovider::{Error, Interface};
use hypercloud_testenv::pki::client_pki;
use support::Cloud;

#[tokio::test]
async fn ca_file_trusts_the_cloud_and_nothing_else_does() {
    let certs = tempfile::tempdir().unwrap();
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let cert_file = certs.path().join("tls.crt");
    let key_file = certs.path().join("tls.key");
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let cloud = Cloud::start_with(|mut c| {
        c.tls = Some(hypercloud_localcloud::TlsFiles {
            cert_file: cert_file.clone(),
            key_file,
        });
        c
    })
    .await;
    assert!(cloud.url.starts_with("https://"), "{}", cloud.url);
    cloud.create_server("tls-node", "1", None).await;

    let trusted = cloud.provider(&format!(
        "{}ca-file = {}\n",
        cloud.global(),
        cert_file.display()
    ));
    trusted.initialize(None).await.unwrap();
    assert_eq!(
        trusted
            .instances()
            .unwrap()
            .instance_type("tls-node")
            .await
            .unwrap(),
        "m1.tiny"
    );

    let untrusted = cloud.provider(&format!(
        "{}[Hypercloud]\nmax-attempts = 1\n",
        cloud.global()
    ));
    let e = untrusted.initialize(None).await.unwrap_err();
    assert!(matches!(e, Error::Cloud { status: None, .. }), "{e}");
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("certificate"),
        "{e}"
    );

    let insecure = cloud.provider(&format!("{}tls-insecure = true\n", cloud.global()));
    insecure.initialize(None).await.unwrap();

    let missing = format!("{}ca-file = /nonexistent/ca.pem\n", cloud.global());
    let cc = hypercloud_cloudprovider::CloudConfig {
        origin: "c.conf".into(),
        bytes: missing.into_bytes(),
    };
    let e = hypercloud_providers_openstack::OpenStack::from_cloud_config(
        Some(&cc),
        hypercloud_cloudprovider::Layout::External,
    )
    .unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("[Global] ca-file: cannot read /nonexistent/ca.pem"),
        "{e}"
    );
    cloud.shutdown().await;
}

/// `cert-file`/`key-file`: against a cloud that requires client certificates
/// (`--tls-client-ca`), the provider presents its certificate to Keystone and the services;
/// without one, or with one of another CA, the handshake fails; half a pair is refused at start.
#[tokio::test]
async fn a_client_certificate_is_presented_where_one_is_required() {
    let dir = tempfile::tempdir().unwrap();
    let ccm = client_pki(dir.path(), "ccm");
    let stranger = client_pki(dir.path(), "stranger");
    let admin = reqwest::Identity::from_pem(&ccm.identity_pem()).unwrap();
    let (ca, cert, key) = (ccm.ca, ccm.cert, ccm.key);
    let cloud = Cloud::start_with_identity(
        |mut c| {
            c.tls_self_signed = true;
            c.tls_client_ca = Some(ca.clone());
            c
        },
        Some(admin),
    )
    .await;
    assert!(cloud.url.starts_with("https://"), "{}", cloud.url);
    cloud.create_server("mtls-node", "1", None).await;
    let base = format!("{}tls-insecure = true\n", cloud.global());
    let with = |cert: &std::path::Path, key: &std::path::Path| {
        format!(
            "{base}cert-file = {}\nkey-file = {}\n[Hypercloud]\nmax-attempts = 1\n",
            cert.display(),
            key.display()
        )
    };
    let os = cloud.provider(&with(&cert, &key));
    os.initialize(None).await.unwrap();
    assert_eq!(
        os.instances()
            .unwrap()
            .instance_type("mtls-node")
            .await
            .unwrap(),
        "m1.tiny"
    );
    for conf in [
        format!("{base}[Hypercloud]\nmax-attempts = 1\n"),
        with(&stranger.cert, &stranger.key),
    ] {
        let e = cloud.provider(&conf).initialize(None).await.unwrap_err();
        assert!(matches!(e, Error::Cloud { status: None, .. }), "{e}");
    }
    let half = hypercloud_cloudprovider::CloudConfig {
        origin: "c.conf".into(),
        bytes: format!("{base}cert-file = {}\n", cert.display()).into_bytes(),
    };
    let e = hypercloud_providers_openstack::OpenStack::from_cloud_config(
        Some(&half),
        hypercloud_cloudprovider::Layout::External,
    )
    .unwrap_err();
    assert!(e.to_string().contains("cert-file needs key-file"), "{e}");
    cloud.shutdown().await;
}
