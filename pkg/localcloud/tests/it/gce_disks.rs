//! Compute Engine persistent disks over HTTP: `instances.attachDisk`/`detachDisk`,
//! `disks.resize` and `disks.delete` answer zonal Operations, the instance lists its disks in
//! `disks[]` and the disk its instances in `users[]`, Cinder sees the same attachments, and
//! what GCE refuses (a second read-write user, a shrink, deleting a disk in use) is refused
//! with GCE's reason.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{Reply, TestCloud};

const GCE: &str = "/compute/v1/projects/demo";

/// The dialect's first zone.
async fn first_zone(c: &TestCloud) -> String {
    let zones = c.get(&format!("{GCE}/zones")).await;
    zones.body["items"][0]["name"].as_str().unwrap().to_owned()
}

/// A GCE error answer: `status`, GCE's body, and `reason`.
fn assert_gce_error(r: &Reply, status: u16, reason: &str, what: &str) {
    assert_eq!(r.status.as_u16(), status, "{what}: {}", r.body);
    assert_eq!(
        r.body["error"]["errors"][0]["reason"], reason,
        "{what}: {}",
        r.body
    );
}

/// A zonal Operation of `op_type`, `DONE`, on `target` (a path ending the target link).
fn assert_done(r: &Reply, op_type: &str, target: &str) {
    assert_eq!(r.status, StatusCode::OK, "{op_type}: {}", r.body);
    assert_eq!(r.body["kind"], "compute#operation", "{}", r.body);
    assert_eq!(r.body["operationType"], op_type, "{}", r.body);
    assert_eq!(r.body["status"], "DONE", "{}", r.body);
    assert!(
        r.body["targetLink"].as_str().unwrap().ends_with(target),
        "{}",
        r.body
    );
    assert!(
        r.body["zone"].as_str().unwrap().contains("/zones/"),
        "{}",
        r.body
    );
}

struct Zone<'a> {
    c: &'a TestCloud,
    zone: String,
}

impl Zone<'_> {
    fn path(&self, rest: &str) -> String {
        format!("{GCE}/zones/{}/{rest}", self.zone)
    }

    async fn instance(&self, name: &str) -> Value {
        let r = self
            .c
            .post(
                &self.path("instances"),
                json!({"name": name, "machineType": format!("zones/{}/machineTypes/m1.small", self.zone)}),
            )
            .await;
        assert_done(&r, "insert", &format!("instances/{name}"));
        self.c
            .get(&self.path(&format!("instances/{name}")))
            .await
            .body
    }

    async fn disk(&self, name: &str, size: &str) {
        let r = self
            .c
            .post(&self.path("disks"), json!({"name": name, "sizeGb": size}))
            .await;
        assert_done(&r, "insert", &format!("disks/{name}"));
    }

    async fn attach(&self, instance: &str, body: Value) -> Reply {
        self.c
            .post(
                &self.path(&format!("instances/{instance}/attachDisk")),
                body,
            )
            .await
    }

    async fn detach(&self, instance: &str, device: &str) -> Reply {
        self.c
            .post(
                &self.path(&format!(
                    "instances/{instance}/detachDisk?deviceName={device}"
                )),
                json!({}),
            )
            .await
    }

    async fn get(&self, rest: &str) -> Value {
        let r = self.c.get(&self.path(rest)).await;
        assert_eq!(r.status, StatusCode::OK, "{rest}: {}", r.body);
        r.body
    }
}

#[tokio::test]
async fn disks_attach_show_detach_and_are_refused_where_gce_refuses() {
    let c = TestCloud::start().await;
    let z = Zone {
        zone: first_zone(&c).await,
        c: &c,
    };
    let vm1 = z.instance("vm-1").await;
    assert_eq!(vm1["disks"], json!([]), "{vm1}");
    z.instance("vm-2").await;
    z.disk("data", "10").await;
    let source = z.get("disks/data").await["selfLink"]
        .as_str()
        .unwrap()
        .to_owned();

    // Attach read-write with a device name: a DONE Operation on the instance.
    let r = z
        .attach(
            "vm-1",
            json!({"source": source, "deviceName": "data", "mode": "READ_WRITE"}),
        )
        .await;
    assert_done(&r, "attachDisk", "instances/vm-1");
    let disks = &z.get("instances/vm-1").await["disks"];
    assert_eq!(disks.as_array().unwrap().len(), 1, "{disks}");
    let d = &disks[0];
    assert_eq!(d["kind"], "compute#attachedDisk");
    assert_eq!(d["deviceName"], "data");
    assert_eq!(d["mode"], "READ_WRITE");
    assert_eq!(d["source"], source.as_str());
    assert_eq!(d["type"], "PERSISTENT");
    assert_eq!(d["boot"], false);
    assert_eq!(d["autoDelete"], false);
    assert_eq!(d["index"], 0);
    let users = &z.get("disks/data").await["users"];
    assert_eq!(users.as_array().unwrap().len(), 1, "{users}");
    assert!(users[0].as_str().unwrap().ends_with("/instances/vm-1"));
    // Cinder sees the same attachment.
    let vols = c.get(&format!("{}/detail", c.volumes())).await;
    let vol = vols.body["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "data")
        .unwrap()
        .clone();
    assert_eq!(vol["status"], "in-use", "{vol}");
    assert_eq!(vol["attachments"].as_array().unwrap().len(), 1, "{vol}");

    // A second user of a read-write disk, the same instance again, a device name in use,
    // a disk of another name, a bad mode: each refused, nothing changed.
    let r = z.attach("vm-2", json!({"source": source})).await;
    assert_gce_error(&r, 400, "resourceInUseByAnotherResource", "a second user");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("instances/vm-1"),
        "{}",
        r.body
    );
    let r = z
        .attach("vm-1", json!({"source": source, "mode": "READ_ONLY"}))
        .await;
    assert_gce_error(&r, 400, "resourceInUseByAnotherResource", "attached again");
    z.disk("other", "1").await;
    let r = z
        .attach(
            "vm-1",
            json!({"source": format!("zones/{}/disks/other", z.zone), "deviceName": "data"}),
        )
        .await;
    assert_gce_error(&r, 400, "invalid", "a device name in use");
    let r = z
        .attach(
            "vm-1",
            json!({"source": format!("zones/{}/disks/nope", z.zone)}),
        )
        .await;
    assert_gce_error(&r, 404, "notFound", "a missing disk");
    let r = z
        .attach("vm-1", json!({"source": "other", "mode": "WRITE_MOSTLY"}))
        .await;
    assert_gce_error(&r, 400, "invalid", "a bad mode");
    let r = z.attach("vm-1", json!({"deviceName": "x"})).await;
    assert_gce_error(&r, 400, "required", "no source");
    assert_eq!(
        z.get("instances/vm-1").await["disks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Deleting a disk in use is GCE's 400; detaching frees it.
    let r = c.delete(&z.path("disks/data")).await;
    assert_gce_error(&r, 400, "resourceInUseByAnotherResource", "delete in use");
    let r = z.detach("vm-1", "nope").await;
    assert_gce_error(&r, 400, "invalid", "an unknown device");
    let r = z.detach("vm-1", "data").await;
    assert_done(&r, "detachDisk", "instances/vm-1");
    assert_eq!(z.get("instances/vm-1").await["disks"], json!([]));
    assert!(z.get("disks/data").await.get("users").is_none());
    let r = c.delete(&z.path("disks/data")).await;
    assert_done(&r, "delete", "disks/data");
    let r = c.get(&z.path("disks/data")).await;
    assert_gce_error(&r, 404, "notFound", "deleted");
}

#[tokio::test]
async fn read_only_disks_are_shared_and_default_device_names_are_gces() {
    let c = TestCloud::start().await;
    let z = Zone {
        zone: first_zone(&c).await,
        c: &c,
    };
    z.instance("a").await;
    z.instance("b").await;
    z.disk("shared", "2").await;
    let source = format!("zones/{}/disks/shared", z.zone);
    for vm in ["a", "b"] {
        let r = z
            .attach(vm, json!({"source": source, "mode": "READ_ONLY"}))
            .await;
        assert_done(&r, "attachDisk", &format!("instances/{vm}"));
        let d = &z.get(&format!("instances/{vm}")).await["disks"][0];
        assert_eq!(d["mode"], "READ_ONLY", "{d}");
        assert_eq!(d["deviceName"], "persistent-disk-0", "{d}");
    }
    assert_eq!(
        z.get("disks/shared").await["users"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // A read-write user may not join read-only ones.
    z.instance("c").await;
    let r = z.attach("c", json!({"source": source})).await;
    assert_gce_error(&r, 400, "resourceInUseByAnotherResource", "rw joins ro");
    // Detaching one reader leaves the other.
    let r = z.detach("a", "persistent-disk-0").await;
    assert_done(&r, "detachDisk", "instances/a");
    let users = z.get("disks/shared").await["users"].clone();
    assert_eq!(users.as_array().unwrap().len(), 1, "{users}");
    assert!(users[0].as_str().unwrap().ends_with("/instances/b"));
}

#[tokio::test]
async fn disks_grow_attached_or_not_and_never_shrink() {
    let c = TestCloud::start().await;
    let z = Zone {
        zone: first_zone(&c).await,
        c: &c,
    };
    z.disk("grow", "10").await;
    let resize = async |size: Value| {
        c.post(&z.path("disks/grow/resize"), json!({ "sizeGb": size }))
            .await
    };
    let r = resize(json!("20")).await;
    assert_done(&r, "resize", "disks/grow");
    assert_eq!(z.get("disks/grow").await["sizeGb"], "20");
    for (size, what) in [(json!("20"), "the same size"), (json!("5"), "a shrink")] {
        let r = resize(size).await;
        assert_gce_error(&r, 400, "invalid", what);
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("must be larger than existing size '20' GiB"),
            "{}",
            r.body
        );
    }
    let r = resize(json!("lots")).await;
    assert_gce_error(&r, 400, "invalid", "not a number");
    let r = c
        .post(&z.path("disks/grow/resize"), json!({"size": "30"}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = c
        .post(&z.path("disks/nope/resize"), json!({"sizeGb": "30"}))
        .await;
    assert_gce_error(&r, 404, "notFound", "a missing disk");
    assert_eq!(z.get("disks/grow").await["sizeGb"], "20");

    // An attached disk grows in place and stays attached.
    z.instance("vm").await;
    let r = z
        .attach(
            "vm",
            json!({"source": format!("zones/{}/disks/grow", z.zone), "deviceName": "grow"}),
        )
        .await;
    assert_done(&r, "attachDisk", "instances/vm");
    let r = resize(json!(30)).await;
    assert_done(&r, "resize", "disks/grow");
    let d = &z.get("instances/vm").await["disks"][0];
    assert_eq!(d["diskSizeGb"], "30", "{d}");
    assert_eq!(z.get("disks/grow").await["sizeGb"], "30");
}

#[tokio::test]
async fn disk_types_and_labels_are_kept_and_bad_types_refused_as_gce_refuses() {
    let c = TestCloud::start().await;
    let z = Zone {
        zone: first_zone(&c).await,
        c: &c,
    };
    let zone = z.zone.clone();
    // A full link, a partial one, none: the type is kept (pd-standard by default).
    for (name, link, want) in [
        (
            "fast",
            format!("https://compute.googleapis.com/compute/v1/projects/demo/zones/{zone}/diskTypes/pd-ssd"),
            "pd-ssd",
        ),
        ("balanced", format!("zones/{zone}/diskTypes/pd-balanced"), "pd-balanced"),
    ] {
        let r = c
            .post(
                &z.path("disks"),
                json!({"name": name, "sizeGb": "1", "type": link, "labels": {"team": "storage"}}),
            )
            .await;
        assert_done(&r, "insert", &format!("disks/{name}"));
        let d = z.get(&format!("disks/{name}")).await;
        assert!(
            d["type"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/zones/{zone}/diskTypes/{want}")),
            "{d}"
        );
        assert_eq!(d["labels"], json!({"team": "storage"}), "{d}");
    }
    z.disk("plain", "1").await;
    let d = z.get("disks/plain").await;
    assert!(
        d["type"]
            .as_str()
            .unwrap()
            .ends_with("/diskTypes/pd-standard"),
        "{d}"
    );

    // A type the zone lacks is not found; another zone's or a malformed link is invalid;
    // labels that are not strings are invalid. Nothing is created.
    let cases = [
        (
            json!(format!("zones/{zone}/diskTypes/pd-nope")),
            404,
            "notFound",
        ),
        (json!("zones/elsewhere-z/diskTypes/pd-ssd"), 400, "invalid"),
        (json!("pd-ssd"), 400, "invalid"),
    ];
    for (link, status, reason) in cases {
        let r = c
            .post(
                &z.path("disks"),
                json!({"name": "bad", "sizeGb": "1", "type": link}),
            )
            .await;
        assert_gce_error(&r, status, reason, &link.to_string());
    }
    let r = c
        .post(
            &z.path("disks"),
            json!({"name": "bad", "sizeGb": "1", "labels": {"n": 1}}),
        )
        .await;
    assert_gce_error(&r, 400, "invalid", "a number label");
    let r = c.get(&z.path("disks/bad")).await;
    assert_gce_error(&r, 404, "notFound", "the refused disk");
}
