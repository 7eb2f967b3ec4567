//! The official OpenStack CLI (python-openstackclient, pinned in hack/python-tools.sh) against
//! the real `hypercloud local-cloud serve`, through the clouds.yaml the server writes. Output is
//! read as JSON (`-f json`) and asserted.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use hypercloud_testenv::localcloud::{
    cli, cli_json, loops_under, openstack_cli, openstack_json, state_dir, LoopGuard, Serve,
};
use serde_json::Value;

use crate::BIN;

fn openstack_ok(bin: &Path, state: &Path, args: &[&str]) {
    let out = Command::new(bin)
        .env("OS_CLIENT_CONFIG_FILE", state.join("clouds.yaml"))
        .env("OS_CLOUD", "local")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openstack {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn openstack_cli_sees_servers_volumes_networks_and_routers() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_openstack_cli");
    let os = openstack_cli();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);

    let web1 = cli_json(
        BIN,
        &dir,
        &[
            "instance",
            "create",
            "web-1",
            "--address",
            "127.1.0.50",
            "-o",
            "json",
        ],
    );
    cli_json(BIN, &dir, &["instance", "create", "web-2", "-o", "json"]);
    assert!(cli(BIN, &dir, &["instance", "stop", "web-2"])
        .status
        .success());
    let vol = cli_json(
        BIN,
        &dir,
        &["volume", "create", "data", "--size", "3", "-o", "json"],
    );

    let servers = openstack_json(&dir, &["server", "list"]);
    let servers = servers.as_array().unwrap();
    assert_eq!(servers.len(), 2);
    let row = |name: &str| servers.iter().find(|s| s["Name"] == name).unwrap().clone();
    assert_eq!(row("web-1")["Status"], "ACTIVE");
    assert_eq!(row("web-1")["ID"], web1["id"]);
    assert_eq!(row("web-1")["Networks"]["private"][0], "127.1.0.50");
    assert_eq!(row("web-1")["Flavor"], "m1.small");
    assert_eq!(row("web-2")["Status"], "SHUTOFF");

    let show = openstack_json(&dir, &["server", "show", "web-1"]);
    assert_eq!(show["id"], web1["id"]);
    assert_eq!(show["status"], "ACTIVE");
    assert_eq!(show["OS-EXT-AZ:availability_zone"], "nova");
    assert_eq!(show["flavor"]["original_name"], "m1.small");

    // A learner's first command: boot from the seeded image.
    let booted = openstack_json(
        &dir,
        &[
            "server",
            "create",
            "--flavor",
            "m1.tiny",
            "--network",
            "private",
            "--image",
            "cirros-0.6.2-x86_64-disk",
            "vm-cli",
        ],
    );
    assert_eq!(booted["name"], "vm-cli");
    assert_eq!(booted["status"], "ACTIVE");
    assert_eq!(booted["flavor"]["original_name"], "m1.tiny");
    let image = openstack_json(&dir, &["image", "list"]);
    assert_eq!(image[0]["Name"], "cirros-0.6.2-x86_64-disk");
    let servers = openstack_json(&dir, &["server", "list", "--name", "^vm-cli$"]);
    assert_eq!(servers[0]["Image"], "cirros-0.6.2-x86_64-disk");

    openstack_ok(&os, &dir, &["server", "add", "volume", "web-1", "data"]);
    let volumes = openstack_json(&dir, &["volume", "list"]);
    let v = &volumes.as_array().unwrap()[0];
    assert_eq!(v["ID"], vol["id"]);
    assert_eq!(v["Name"], "data");
    assert_eq!(v["Size"], 3);
    assert_eq!(v["Status"], "in-use");
    assert_eq!(v["Attached to"][0]["server_id"], web1["id"]);

    let networks = openstack_json(&dir, &["network", "list"]);
    let mut names: Vec<&str> = networks
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["Name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["private", "public"]);

    openstack_ok(
        &os,
        &dir,
        &[
            "router",
            "add",
            "route",
            "--route",
            "destination=10.244.1.0/24,gateway=127.1.0.50",
            "router1",
        ],
    );
    let router = openstack_json(&dir, &["router", "show", "router1"]);
    assert_eq!(router["name"], "router1");
    assert_eq!(router["status"], "ACTIVE");
    assert_eq!(router["routes"][0]["destination"], "10.244.1.0/24");
    assert_eq!(router["routes"][0]["nexthop"], "127.1.0.50");
    assert_eq!(router["interfaces_info"][0]["ip_address"], "127.1.0.1");
    assert!(router["external_gateway_info"]["network_id"].is_string());
    serve.terminate();
}

#[test]
fn openstack_cli_sees_load_balancers_and_members() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_openstack_cli");
    let os = openstack_cli();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let _serve = Serve::start(BIN, &dir, &[]);

    // Octavia's flavors, looked up by name as the CLI does.
    let flavors = openstack_json(&dir, &["loadbalancer", "flavor", "list"]);
    assert_eq!(flavors.as_array().unwrap().len(), 3, "{flavors}");
    let ha = openstack_json(&dir, &["loadbalancer", "flavor", "show", "amphora-ha"]);
    assert_eq!(ha["enabled"], true, "{ha}");
    // No listener: nothing binds, so parallel servers on the default VIP pool cannot collide.
    let lb = openstack_json(
        &dir,
        &[
            "loadbalancer",
            "create",
            "--name",
            "web-lb",
            "--vip-subnet-id",
            "private-subnet",
            "--flavor",
            "amphora-ha",
            "--wait",
        ],
    );
    assert_eq!(lb["name"], "web-lb");
    assert_eq!(lb["flavor_id"], ha["id"]);
    let lb_id = lb["id"].as_str().unwrap().to_owned();
    let pool = openstack_json(
        &dir,
        &[
            "loadbalancer",
            "pool",
            "create",
            "--name",
            "web-pool",
            "--loadbalancer",
            &lb_id,
            "--protocol",
            "TCP",
            "--lb-algorithm",
            "ROUND_ROBIN",
            "--wait",
        ],
    );
    assert_eq!(pool["lb_algorithm"], "ROUND_ROBIN");
    openstack_json(
        &dir,
        &[
            "loadbalancer",
            "member",
            "create",
            "--name",
            "node-1",
            "--address",
            "127.1.0.3",
            "--protocol-port",
            "30080",
            "--wait",
            "web-pool",
        ],
    );

    let list = openstack_json(&dir, &["loadbalancer", "list"]);
    let row = &list.as_array().unwrap()[0];
    assert_eq!(row["id"], lb_id.as_str());
    assert_eq!(row["name"], "web-lb");
    assert_eq!(row["provisioning_status"], "ACTIVE");
    assert_eq!(row["operating_status"], "ONLINE");
    assert_eq!(row["provider"], "amphora");
    assert!(row["vip_address"]
        .as_str()
        .unwrap()
        .starts_with("127.0.100."));

    let show = openstack_json(&dir, &["loadbalancer", "show", "web-lb"]);
    assert_eq!(show["id"], lb_id.as_str());
    assert_eq!(show["provisioning_status"], "ACTIVE");
    assert_eq!(show["pools"][0]["id"], pool["id"]);

    let members = openstack_json(&dir, &["loadbalancer", "member", "list", "web-pool"]);
    let m = &members.as_array().unwrap()[0];
    assert_eq!(m["name"], "node-1");
    assert_eq!(m["address"], "127.1.0.3");
    assert_eq!(m["protocol_port"], 30080);
    assert_eq!(m["operating_status"], "NO_MONITOR");
    assert_eq!(m["provisioning_status"], "ACTIVE");

    openstack_ok(
        &os,
        &dir,
        &["loadbalancer", "delete", "--cascade", "--wait", "web-lb"],
    );
    let list = openstack_json(&dir, &["loadbalancer", "list"]);
    assert_eq!(list, Value::Array(vec![]));
}

/// `openstack <args> -f json` that must fail; its stderr.
fn openstack_err(bin: &Path, state: &Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .env("OS_CLIENT_CONFIG_FILE", state.join("clouds.yaml"))
        .env("OS_CLOUD", "local")
        .args(args)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "openstack {args:?} succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The `devices` of an instance's config drive `meta_data.json`.
fn drive_devices(state: &Path, server_id: &str) -> Vec<Value> {
    let path = state.join(format!(
        "config-drive/{server_id}/openstack/latest/meta_data.json"
    ));
    let meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta["devices"].as_array().unwrap().clone()
}

/// Nova's `os-volume_attachments` as the official CLI drives it: device paths per server,
/// Cinder's `attachments` and status, the refusal of a second attach of a volume that is not
/// multiattach (and a multiattach volume on two servers), detach, the config drive and the
/// metadata service's view, and a restart keeping it all.
#[test]
fn openstack_cli_attaches_and_detaches_volumes() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_openstack_cli");
    let os = openstack_cli();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let a = cli_json(BIN, &dir, &["instance", "create", "vm-a", "-o", "json"]);
    let b = cli_json(BIN, &dir, &["instance", "create", "vm-b", "-o", "json"]);
    let (a_id, b_id) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    let d1 = openstack_json(&dir, &["volume", "create", "--size", "1", "d1"]);
    let d2 = openstack_json(&dir, &["volume", "create", "--size", "2", "d2"]);
    let shared = openstack_json(
        &dir,
        &[
            "volume",
            "create",
            "--size",
            "1",
            "--type",
            "multiattach",
            "shared",
        ],
    );
    assert_eq!(shared["multiattach"], true);
    assert_eq!(d1["multiattach"], false);

    // Devices are allocated per server, from vdb.
    let att = openstack_json(&dir, &["server", "add", "volume", "vm-a", "d1"]);
    assert_eq!(att["Device"], "/dev/vdb");
    let att = openstack_json(&dir, &["server", "add", "volume", "vm-a", "d2"]);
    assert_eq!(att["Device"], "/dev/vdc");
    let att = openstack_json(&dir, &["server", "add", "volume", "vm-b", "shared"]);
    assert_eq!(att["Device"], "/dev/vdb");

    let show = openstack_json(&dir, &["volume", "show", "d1"]);
    assert_eq!(show["status"], "in-use");
    let attachments = show["attachments"].as_array().unwrap();
    assert_eq!(attachments.len(), 1);
    assert_eq!(attachments[0]["server_id"], a_id);
    assert_eq!(attachments[0]["device"], "/dev/vdb");
    assert!(attachments[0]["attachment_id"].is_string());

    // d1 is not multiattach and in use: Cinder's reservation refuses it, Nova says so.
    let err = openstack_err(&os, &dir, &["server", "add", "volume", "vm-b", "d1"]);
    assert!(
        err.contains(&format!(
            "Invalid volume: Volume {} status must be available or downloading to reserve, but the current status is in-use",
            d1["id"].as_str().unwrap()
        )),
        "{err}"
    );
    // A multiattach volume goes to a second server.
    let att = openstack_json(&dir, &["server", "add", "volume", "vm-a", "shared"]);
    assert_eq!(att["Device"], "/dev/vdd");
    let show = openstack_json(&dir, &["volume", "show", "shared"]);
    assert_eq!(show["status"], "in-use");
    let mut servers: Vec<&str> = show["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["server_id"].as_str().unwrap())
        .collect();
    servers.sort();
    let mut both = vec![a_id, b_id];
    both.sort();
    assert_eq!(servers, both);

    // The instance sees its disks: config drive and metadata service.
    let serials: Vec<Value> = drive_devices(&dir, a_id)
        .iter()
        .map(|d| d["serial"].clone())
        .collect();
    assert_eq!(
        serials,
        [d1["id"].clone(), d2["id"].clone(), shared["id"].clone()]
    );
    let md = |path: &str| {
        let (status, _, body) = hypercloud_testenv::localcloud::http(
            "GET",
            &format!("{}{path}", serve.metadata_url),
            &[("X-Instance-ID", a_id)],
            None,
        );
        assert_eq!(status, 200, "{path}: {body}");
        body
    };
    assert_eq!(
        md("/latest/meta-data/block-device-mapping/ebs1"),
        "/dev/vdc"
    );
    let meta: Value = serde_json::from_str(&md("/openstack/latest/meta_data.json")).unwrap();
    assert_eq!(meta["devices"].as_array().unwrap().len(), 3);

    // Detach: the volume is available again with no attachments, the device freed.
    openstack_ok(&os, &dir, &["server", "remove", "volume", "vm-a", "d1"]);
    let show = openstack_json(&dir, &["volume", "show", "d1"]);
    assert_eq!(show["status"], "available");
    assert_eq!(show["attachments"], serde_json::json!([]));
    assert_eq!(drive_devices(&dir, a_id).len(), 2);
    let att = openstack_json(&dir, &["server", "add", "volume", "vm-b", "d1"]);
    assert_eq!(att["Device"], "/dev/vdc");
    // Detaching one of two attachments leaves a multiattach volume in use.
    openstack_ok(&os, &dir, &["server", "remove", "volume", "vm-b", "shared"]);
    let show = openstack_json(&dir, &["volume", "show", "shared"]);
    assert_eq!(show["status"], "in-use");
    assert_eq!(show["attachments"][0]["server_id"], a_id);

    // Durable: a restart keeps the attachments.
    serve.terminate();
    let serve = Serve::start(BIN, &dir, &[]);
    let list = openstack_json(&dir, &["server", "volume", "list", "vm-b"]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["Volume ID"], d1["id"]);
    assert_eq!(list[0]["Device"], "/dev/vdc");
    let show = openstack_json(&dir, &["volume", "show", "d1"]);
    assert_eq!(show["status"], "in-use");
    assert_eq!(show["attachments"][0]["server_id"], b_id);
    serve.terminate();
}

/// The official CLI on a cloud whose volumes are backed (`--volume-backing=sparse-file`, as
/// root): `volume create` makes the sparse file, `volume set --size` grows it, `server add
/// volume` makes the instance's `virtio-<id[:20]>` link to a loop device of that file (the
/// API's device unchanged), `server remove volume` and `volume delete` undo it all.
#[test]
fn openstack_cli_works_on_a_backed_cloud() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_openstack_cli");
    let os = openstack_cli();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let _loops = LoopGuard(tmp.path().to_owned());
    let serve = Serve::start_backed(BIN, &dir, &[]);
    assert_eq!(
        serve.devices_dir.as_deref(),
        Some(dir.join("devices").as_path())
    );
    let vm = cli_json(BIN, &dir, &["instance", "create", "vm", "-o", "json"]);
    let vm_id = vm["id"].as_str().unwrap();
    let vol = openstack_json(&dir, &["volume", "create", "--size", "1", "data"]);
    let vol_id = vol["id"].as_str().unwrap();
    let file = dir.join(format!("volumes/{vol_id}.img"));
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 1 << 30);
    openstack_ok(&os, &dir, &["volume", "set", "--size", "2", "data"]);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 2 << 30);
    assert_eq!(openstack_json(&dir, &["volume", "show", "data"])["size"], 2);

    let att = openstack_json(&dir, &["server", "add", "volume", "vm", "data"]);
    assert_eq!(att["Device"], "/dev/vdb");
    let link = serve.device_link(vm_id, vol_id);
    let dev = std::fs::read_link(&link).unwrap();
    let loops = loops_under(&dir);
    assert_eq!(loops.len(), 1, "{loops:?}");
    assert_eq!(loops[0].0, dev);
    assert_eq!(Path::new(&loops[0].1), file.canonicalize().unwrap());

    openstack_ok(&os, &dir, &["server", "remove", "volume", "vm", "data"]);
    assert!(!link.exists());
    openstack_ok(&os, &dir, &["volume", "delete", "data"]);
    assert!(!file.exists());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !loops_under(&dir).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(loops_under(&dir), vec![]);
    let status = cli_json(BIN, &dir, &["status", "-o", "json"]);
    assert_eq!(status["volume_backing"], "sparse-file", "{status}");
}

/// Keystone trusts as the OpenStack CLI drives them: a user made with `openstack user create`
/// becomes the trustee of `openstack trust create`; authenticating as it with the trust (a
/// clouds.yaml entry with `trust_id`, as OCCM's cloud.conf `trust-id`) gives a token of the
/// trust's project that works for the other APIs; deleting the trust ends it.
#[test]
fn openstack_cli_authenticates_through_a_trust() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_openstack_cli");
    let os = openstack_cli();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    cli_json(
        BIN,
        &dir,
        &["instance", "create", "trusted-1", "-o", "json"],
    );
    let admin = openstack_json(&dir, &["token", "issue"]);
    let trustee = openstack_json(
        &dir,
        &[
            "user",
            "create",
            "--password",
            "tp-9a7",
            "--domain",
            "Default",
            "ccm-trustee",
        ],
    );
    let trustee_id = trustee["id"].as_str().unwrap();
    let trust = openstack_json(
        &dir,
        &[
            "trust",
            "create",
            "--project",
            "demo",
            "--role",
            "member",
            "admin",
            "ccm-trustee",
        ],
    );
    let trust_id = trust["id"].as_str().unwrap();
    assert_eq!(trust["trustee_user_id"], trustee_id, "{trust}");
    assert_eq!(trust["is_impersonation"], false, "{trust}");

    // The trustee's clouds.yaml: its ID and password, the trust as the scope.
    let clouds = tmp.path().join("trustee-clouds.yaml");
    std::fs::write(
        &clouds,
        format!(
            "clouds:\n  trustee:\n    auth:\n      auth_url: {}/identity/v3\n      user_id: {trustee_id}\n      password: tp-9a7\n      trust_id: {trust_id}\n    region_name: RegionOne\n",
            serve.api_url
        ),
    )
    .unwrap();
    let as_trustee = |args: &[&str]| {
        Command::new(&os)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", tmp.path())
            .env("OS_CLIENT_CONFIG_FILE", &clouds)
            .env("OS_CLOUD", "trustee")
            .args(args)
            .output()
            .unwrap()
    };
    let out = as_trustee(&["token", "issue", "-f", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(token["project_id"], admin["project_id"], "{token}");
    assert_eq!(token["user_id"], trustee_id, "{token}");
    let out = as_trustee(&["server", "list", "-f", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let servers: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        servers
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["Name"] == "trusted-1"),
        "{servers}"
    );

    // The trustee changes its own password (Keystone's self-service call): the old one no
    // longer authenticates, the new one does.
    let out = as_trustee(&[
        "user",
        "password",
        "set",
        "--original-password",
        "tp-9a7",
        "--password",
        "tp-new-3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = as_trustee(&["token", "issue", "-f", "json"]);
    assert!(
        !out.status.success(),
        "the old password still authenticates"
    );
    let text = std::fs::read_to_string(&clouds).unwrap();
    std::fs::write(
        &clouds,
        text.replace("password: tp-9a7", "password: tp-new-3"),
    )
    .unwrap();
    let out = as_trustee(&["token", "issue", "-f", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    openstack_ok(&os, &dir, &["trust", "delete", trust_id]);
    let out = as_trustee(&["token", "issue", "-f", "json"]);
    assert!(
        !out.status.success(),
        "the deleted trust still authenticates"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("401") || err.to_lowercase().contains("authenticat"),
        "{err}"
    );
}
