//! `hypercloud kubelet-helper metadata` against a real `local-cloud serve`: the metadata
//! service answers for the instance named in `[Metadata] instance-id`; with every source
//! failing, the error names each attempt.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use hypercloud_testenv::localcloud::{cli_json, state_dir, Serve};

use crate::BIN;

fn metadata(conf: &std::path::Path) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args([
            "kubelet-helper",
            "metadata",
            "--cloud-provider=local",
            &format!("--cloud-config={}", conf.display()),
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn metadata_prints_this_instance_and_names_every_failed_source() {
    let _group = hypercloud_testenv::group_blocking("kubelet_helper_metadata");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let server = cli_json(
        BIN,
        &dir,
        &[
            "instance", "create", "md-node", "--zone", "nova", "-o", "json",
        ],
    );
    let id = server["id"].as_str().unwrap().to_string();

    let conf = tmp.path().join("cloud.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nauth-url = {}/identity/v3\n[Metadata]\nsearch-order = metadataService\n\
             metadata-url = {}\ninstance-id = {id}\n",
            serve.api_url, serve.metadata_url
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = metadata(&conf);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("search-order: metadataService"), "{stdout}");
    assert!(
        stdout.contains(&format!("uuid:              {id}")),
        "{stdout}"
    );
    assert!(stdout.contains("name:              md-node"), "{stdout}");
    assert!(stdout.contains("availability_zone: nova"), "{stdout}");

    let missing = tmp.path().join("no-drive");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nauth-url = {}/identity/v3\n[Metadata]\nsearch-order = configDrive,metadataService\n\
             config-drive-dir = {}\nmetadata-url = http://127.0.0.1:1\n",
            serve.api_url,
            missing.display()
        ),
    )
    .unwrap();
    let (code, _, stderr) = metadata(&conf);
    assert_ne!(code, 0);
    assert!(stderr.contains("configDrive:"), "{stderr}");
    assert!(stderr.contains("metadataService:"), "{stderr}");
    serve.terminate();
}
