//! The `openstack` and `local` providers in the real binary against a real
//! `hypercloud local-cloud serve` process: start-up report, capabilities, and a clear start-up
//! error for wrong credentials.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use hypercloud_testenv::localcloud::{cli_json, http, state_dir, token, Serve};

use crate::BIN;

fn run(args: &[&str]) -> (i32, String, String) {
    hypercloud_testenv::process::run(BIN, args)
}

#[test]
fn providers_lists_openstack_and_local() {
    let _group = hypercloud_testenv::group_blocking("openstack_provider");
    let (code, stdout, _) = run(&["providers"]);
    assert_eq!(code, 0);
    for name in ["local ", "openstack "] {
        assert!(stdout.lines().any(|l| l.starts_with(name)), "{stdout}");
    }
}

#[test]
fn controller_manager_starts_openstack_and_local_against_a_local_cloud_process() {
    let _group = hypercloud_testenv::group_blocking("openstack_provider");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    cli_json(BIN, &dir, &["instance", "create", "node-1", "-o", "json"]);
    let t = token(&serve.api_url);
    let (status, _, body) = http(
        "GET",
        &format!("{}/network/v2.0/routers?name=router1", serve.api_url),
        &[("X-Auth-Token", &t)],
        None,
    );
    assert_eq!(status, 200, "{body}");
    let routers: serde_json::Value = serde_json::from_str(&body).unwrap();
    let router = routers["routers"][0]["id"].as_str().unwrap();

    let conf = tmp.path().join("cloud.conf");
    let good = format!(
        "[Global]\nauth-url = {}/identity/v3\nusername = admin\npassword = hypercloud\nuser-domain-name = Default\nproject-name = demo\nproject-domain-name = Default\nregion = RegionOne\n[Route]\nrouter-id = {router}\n",
        serve.api_url
    );
    std::fs::write(&conf, &good).unwrap();
    let conf_arg = format!("--cloud-config={}", conf.display());
    let (code, stdout, stderr) = run(&[
        "cloud-controller-manager",
        "--cloud-provider=openstack",
        &conf_arg,
        "--kubeconfig=/nonexistent/kubeconfig",
    ]);
    // It got past the cloud (initialized, capabilities reported); what it does without a
    // cluster is the runtime's business, but nothing about the cloud may fail.
    assert!(
        !stderr.contains("initializing cloud provider") && !stderr.contains("--cloud-config"),
        "{code}: {stderr}"
    );
    assert!(
        stdout.contains("cloud provider \"openstack\" initialized"),
        "{stdout}"
    );
    assert!(stdout.contains("  instances-v2   supported"), "{stdout}");
    assert!(stdout.contains("  routes         supported"), "{stdout}");
    // The local cloud has Octavia (a `load-balancer` catalog entry).
    assert!(stdout.contains("  load-balancer  supported"), "{stdout}");
    assert!(stdout.contains("  pv-labeler     supported"), "{stdout}");
    assert!(stdout.contains("  volumes        supported"), "{stdout}");
    assert!(stdout.contains("  attach-detach  supported"), "{stdout}");

    std::fs::write(
        &conf,
        good.replace("password = hypercloud", "password = Wr0ng"),
    )
    .unwrap();
    let (code, stdout, stderr) = run(&[
        "cloud-controller-manager",
        "--cloud-provider=openstack",
        &conf_arg,
        "--kubeconfig=/nonexistent/kubeconfig",
    ]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("rejected the credentials") && stderr.contains("HTTP 401"),
        "{stdout}\n{stderr}"
    );
    assert!(!stderr.contains("Wr0ng"), "password leaked: {stderr}");

    // `local` with only the address overridden.
    std::fs::write(
        &conf,
        format!("[Global]\nauth-url = {}/identity/v3\n", serve.api_url),
    )
    .unwrap();
    let (code, stdout, stderr) = run(&[
        "cloud-controller-manager",
        "--cloud-provider=local",
        &conf_arg,
        "--kubeconfig=/nonexistent/kubeconfig",
    ]);
    assert!(
        !stderr.contains("initializing cloud provider") && !stderr.contains("--cloud-config"),
        "{code}: {stderr}"
    );
    assert!(
        stdout.contains("cloud provider \"local\" initialized"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  routes         not supported"),
        "{stdout}"
    );

    // The cloud.conf and clouds.yaml the local cloud writes into its state directory work
    // as they are, without warnings.
    for (what, conf_text) in [
        (
            "cloud.conf",
            std::fs::read_to_string(dir.join("cloud.conf")).unwrap(),
        ),
        (
            "clouds.yaml",
            format!(
                "[Global]\nuse-clouds = true\nclouds-file = {}\ncloud = local\n",
                dir.join("clouds.yaml").display()
            ),
        ),
    ] {
        std::fs::write(&conf, conf_text).unwrap();
        let (code, stdout, stderr) = run(&[
            "cloud-controller-manager",
            "--cloud-provider=openstack",
            &conf_arg,
            "--kubeconfig=/nonexistent/kubeconfig",
        ]);
        assert!(
            stdout.contains("cloud provider \"openstack\" initialized"),
            "{what}: {code}: {stdout}\n{stderr}"
        );
        assert!(!stderr.contains("unknown key"), "{what}: {stderr}");
    }

    // A cloud.conf without auth-url names the key and the file.
    std::fs::write(&conf, "[Global]\nusername = admin\npassword = x\n").unwrap();
    let (code, _, stderr) = run(&[
        "cloud-controller-manager",
        "--cloud-provider=openstack",
        &conf_arg,
        "--kubeconfig=/nonexistent/kubeconfig",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("auth-url") && stderr.contains(&conf.display().to_string()),
        "{stderr}"
    );
    serve.terminate();
}
