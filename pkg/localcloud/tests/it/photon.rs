//! The Photon dialect's contract: no Photon Controller client installs from the registries here
//! (its Go SDK, `vmware/photon-controller-go-sdk`, was archived in 2017), so this test states
//! the request and answer shapes that SDK's revision vendored by Kubernetes v1.6-v1.13 sends
//! and decodes (`photon/apitypes.go`: `Tenants`, `ProjectList`, `VMs`, `Task`,
//! `PersistentDisk`, `ApiError`, `AuthInfo`; `restclient.go`'s `nextPageLink` paging; `Tasks.Wait`
//! reading `COMPLETED`/`ERROR` and the failed step's `errors`), and walks the legacy provider's
//! calls over HTTP.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{Reply, TestCloud};

/// Follows `nextPageLink` as the SDK's `GetList` does; every page must have `items`.
async fn all_pages(c: &TestCloud, first: &str) -> (Vec<Value>, usize) {
    let (mut items, mut pages, mut next) = (Vec::new(), 0, Some(first.to_owned()));
    while let Some(path) = next {
        let r = c.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
        items.extend(r.body["items"].as_array().expect("items").iter().cloned());
        pages += 1;
        next = r.body["nextPageLink"].as_str().map(str::to_owned);
        assert!(pages < 10, "paging does not end");
    }
    (items, pages)
}

/// Polls a task as `Tasks.Wait` does; returns it once `COMPLETED` or `ERROR`.
async fn wait(c: &TestCloud, answer: &Reply) -> Value {
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(answer.body["state"], "QUEUED", "{}", answer.body);
    let id = answer.body["id"].as_str().expect("task id").to_owned();
    for _ in 0..50 {
        let t = c.get(&format!("/v1/tasks/{id}")).await;
        assert_eq!(t.status, StatusCode::OK, "{}", t.body);
        if matches!(t.body["state"].as_str(), Some("COMPLETED" | "ERROR")) {
            return t.body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("task {id} never finished");
}

#[tokio::test]
async fn the_legacy_provider_s_calls_find_the_project_its_vms_and_their_networks() {
    let c = TestCloud::start().await;
    let status = c.get("/v1/status").await;
    assert_eq!(status.body["status"], "READY", "{}", status.body);
    let auth = c.get("/v1/auth").await;
    assert_eq!(auth.body, json!({"enabled": false}));

    // getProjIDbyName: Tenants.GetAll, then Tenants.GetProjects(tenant.ID).
    let (tenants, _) = all_pages(&c, "/v1/tenants").await;
    assert_eq!(tenants.len(), 1);
    let tenant = tenants[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(tenants[0]["name"], "Default");
    let (projects, _) = all_pages(&c, &format!("/v1/tenants/{tenant}/projects?name=demo")).await;
    assert_eq!(projects.len(), 1, "{projects:?}");
    assert_eq!(projects[0]["id"], c.project.as_str());
    assert_eq!(projects[0]["kind"], "project");

    let a = c.create_server("k8s-a", json!({})).await;
    let b = c.create_server("k8s-b", json!({})).await;
    // Projects.GetVMs, one VM a page: the SDK follows nextPageLink to the end.
    let (vms, pages) = all_pages(&c, &format!("/v1/projects/{}/vms?pageSize=1", c.project)).await;
    assert_eq!(pages, 2);
    let names: Vec<&str> = vms.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(names, ["k8s-a", "k8s-b"]);
    assert_eq!(vms[0]["id"], a.as_str());
    assert_eq!(vms[0]["state"], "STARTED");
    assert_eq!(vms[0]["kind"], "vm");
    let one = c
        .get(&format!("/v1/projects/{}/vms?name=k8s-b", c.project))
        .await;
    assert_eq!(one.body["items"][0]["id"], b.as_str(), "{}", one.body);

    // VMs.GetNetworks answers a task; Tasks.Wait reads its resourceProperties.
    let networks = c.get(&format!("/v1/vms/{a}/subnets")).await;
    assert_eq!(networks.status, StatusCode::OK, "{}", networks.body);
    let task = c
        .get(&format!(
            "/v1/tasks/{}",
            networks.body["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(task.body["state"], "COMPLETED", "{}", task.body);
    let conn = &task.body["resourceProperties"]["networkConnections"][0];
    let ip = conn["ipAddress"].as_str().unwrap();
    assert!(ip.parse::<std::net::IpAddr>().is_ok(), "{conn}");
    assert!(
        conn["macAddress"].as_str().is_some_and(|m| m.len() == 17),
        "{conn}"
    );
    let nova = c.get(&format!("/compute/v2.1/servers/{a}")).await;
    assert!(
        nova.body.to_string().contains(ip),
        "the VM's IP is its server's fixed IP"
    );

    // A stopped VM is STOPPED and its guest reports no address ("-").
    let stop = c
        .post(
            &format!("/compute/v2.1/servers/{a}/action"),
            json!({"os-stop": null}),
        )
        .await;
    assert_eq!(stop.status, StatusCode::ACCEPTED, "{}", stop.body);
    let vm = c.get(&format!("/v1/vms/{a}")).await;
    assert_eq!(vm.body["state"], "STOPPED", "{}", vm.body);
    let networks = c.get(&format!("/v1/vms/{a}/networks")).await;
    assert_eq!(
        networks.body["resourceProperties"]["networkConnections"][0]["ipAddress"],
        "-"
    );

    // Photon's ApiError for what does not exist.
    let missing = c.get("/v1/vms/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body["code"], "VmNotFound", "{}", missing.body);
    assert!(missing.body["message"].as_str().unwrap().contains("nope"));
    let no_project = c.get("/v1/projects/nope/vms").await;
    assert_eq!(
        no_project.body["code"], "ProjectNotFound",
        "{}",
        no_project.body
    );
    let bad_page = c
        .get(&format!("/v1/projects/{}/vms?pageSize=0", c.project))
        .await;
    assert_eq!(bad_page.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn persistent_disks_are_created_attached_detached_and_deleted_through_tasks() {
    let c = TestCloud::start().await;
    let a = c.create_server("k8s-a", json!({})).await;
    let b = c.create_server("k8s-b", json!({})).await;
    let p = c.project.clone();

    // Projects.CreateDisk: a DiskCreateSpec; the task's entity is the new disk.
    let created = c
        .post(
            &format!("/v1/projects/{p}/disks"),
            json!({"name": "kubernetes-dynamic-pvc-1", "kind": "persistent-disk",
                   "flavor": "pd-standard", "capacityGb": 2, "tags": ["k8s"]}),
        )
        .await;
    let task = wait(&c, &created).await;
    assert_eq!(task["state"], "COMPLETED", "{task}");
    assert_eq!(task["operation"], "CREATE_DISK");
    assert_eq!(task["entity"]["kind"], "persistent-disk");
    let disk = task["entity"]["id"].as_str().unwrap().to_owned();
    let d = c.get(&format!("/v1/disks/{disk}")).await;
    assert_eq!(
        (
            &d.body["state"],
            &d.body["capacityGb"],
            &d.body["flavor"],
            &d.body["vms"]
        ),
        (
            &json!("DETACHED"),
            &json!(2),
            &json!("pd-standard"),
            &json!([])
        ),
        "{}",
        d.body
    );
    // The disk is the project's Cinder volume: other clients see the same record.
    let cinder = c.get(&format!("{}/{disk}", c.volumes())).await;
    assert_eq!(cinder.body["volume"]["size"], 2, "{}", cinder.body);

    // VMs.AttachDisk, then Disks.Get lists the VM, as DiskIsAttached reads it.
    let attach = |vm: String| {
        let disk = disk.clone();
        let c = &c;
        async move {
            let r = c
                .post(
                    &format!("/v1/vms/{vm}/attach_disk"),
                    json!({"diskId": disk}),
                )
                .await;
            wait(c, &r).await
        }
    };
    assert_eq!(attach(a.clone()).await["state"], "COMPLETED");
    let d = c.get(&format!("/v1/disks/{disk}")).await;
    assert_eq!(
        (&d.body["state"], &d.body["vms"]),
        (&json!("ATTACHED"), &json!([a]))
    );
    let vm = c.get(&format!("/v1/vms/{a}")).await;
    assert_eq!(
        vm.body["attachedDisks"][0]["id"],
        disk.as_str(),
        "{}",
        vm.body
    );

    // A disk attached elsewhere: the task fails, its step says why, nothing changes.
    let refused = attach(b.clone()).await;
    assert_eq!(refused["state"], "ERROR", "{refused}");
    let err = &refused["steps"][0]["errors"][0];
    assert_eq!(err["code"], "StateError", "{refused}");
    assert!(err["message"].as_str().unwrap().contains(&a), "{refused}");
    let d = c.get(&format!("/v1/disks/{disk}")).await;
    assert_eq!(d.body["vms"], json!([a]));

    // Deleting an attached disk fails; detached, it goes.
    let del = c.delete(&format!("/v1/disks/{disk}")).await;
    assert_eq!(wait(&c, &del).await["state"], "ERROR");
    let detach = c
        .post(&format!("/v1/vms/{a}/detach_disk"), json!({"diskId": disk}))
        .await;
    assert_eq!(wait(&c, &detach).await["state"], "COMPLETED");
    let again = c
        .post(&format!("/v1/vms/{a}/detach_disk"), json!({"diskId": disk}))
        .await;
    assert_eq!(
        wait(&c, &again).await["state"],
        "ERROR",
        "not attached any more"
    );
    let (disks, _) = all_pages(
        &c,
        &format!("/v1/projects/{p}/disks?name=kubernetes-dynamic-pvc-1"),
    )
    .await;
    assert_eq!(disks.len(), 1);
    let del = c.delete(&format!("/v1/disks/{disk}")).await;
    assert_eq!(wait(&c, &del).await["state"], "COMPLETED");
    let gone = c.get(&format!("/v1/disks/{disk}")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(gone.body["code"], "DiskNotFound", "{}", gone.body);

    // Specs Photon refuses are 400 InvalidEntity, naming the field; nothing is created.
    for (spec, says) in [
        (
            json!({"name": "x", "kind": "persistent-disk", "capacityGb": 1}),
            "flavor",
        ),
        (
            json!({"name": "x", "kind": "persistent-disk", "flavor": "f", "capacityGb": -1}),
            "capacityGb",
        ),
        (
            json!({"name": "9x", "kind": "persistent-disk", "flavor": "f", "capacityGb": 1}),
            "name",
        ),
    ] {
        let r = c
            .post(&format!("/v1/projects/{p}/disks"), spec.clone())
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{spec}");
        assert_eq!(r.body["code"], "InvalidEntity", "{}", r.body);
        assert!(
            r.body["message"].as_str().unwrap().contains(says),
            "{}",
            r.body
        );
    }
    let (disks, _) = all_pages(&c, &format!("/v1/projects/{p}/disks")).await;
    assert!(disks.is_empty(), "{disks:?}");
    let no_disk = c
        .post(
            &format!("/v1/vms/{a}/attach_disk"),
            json!({"diskId": "nope"}),
        )
        .await;
    assert_eq!(no_disk.body["code"], "DiskNotFound", "{}", no_disk.body);
}

#[tokio::test]
async fn with_tokens_required_lightwave_tokens_open_the_api() {
    let c = TestCloud::start_with(|mut config| {
        config.photon_require_tokens = true;
        config
    })
    .await;
    let auth = c.get("/v1/auth").await;
    assert_eq!(auth.body["enabled"], true, "{}", auth.body);
    let port = auth.body["port"].as_u64().unwrap();
    assert!(
        c.url.ends_with(&format!(":{port}")),
        "{} {}",
        c.url,
        auth.body
    );
    assert_eq!(
        c.get("/v1/status").await.status,
        StatusCode::OK,
        "status needs no token"
    );

    let denied = c.get("/v1/tenants").await;
    assert_eq!(denied.status, StatusCode::UNAUTHORIZED);
    assert_eq!(denied.body["code"], "MissingAuthToken", "{}", denied.body);

    // GetTokensByPassword: Lightwave's password grant.
    let grant = |password: &'static str| {
        c.http
            .post(format!("{}/openidconnect/token", c.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=password&username=admin%40photon.local&password={password}&scope=openid+offline_access+rs_photon_platform+at_groups"
            ))
            .send()
    };
    let wrong = grant("nope").await.unwrap();
    assert_eq!(wrong.status(), StatusCode::BAD_REQUEST);
    let wrong: Value = wrong.json().await.unwrap();
    assert_eq!(wrong["error"], "invalid_grant", "{wrong}");
    let ok: Value = grant("hypercloud").await.unwrap().json().await.unwrap();
    let token = ok["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned();
    assert_eq!(ok["token_type"], "Bearer");
    assert!(ok["expires_in"].as_u64().is_some_and(|s| s > 0), "{ok}");

    let get = |bearer: String| {
        c.http
            .get(format!("{}/v1/tenants", c.url))
            .bearer_auth(bearer)
            .send()
    };
    assert_eq!(get(token).await.unwrap().status(), StatusCode::OK);
    let stale = get("not-a-token".into()).await.unwrap();
    assert_eq!(stale.status(), StatusCode::UNAUTHORIZED);
    let stale: Value = stale.json().await.unwrap();
    assert_eq!(stale["code"], "ExpiredAuthToken", "{stale}");
}
