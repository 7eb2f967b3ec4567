//! The CloudStack dialect (`/client/api`): judged by PyPI `cs` 5.2.0 signing and polling
//! through hack/conformance/cloudstack_conformance.py (cs from hack/python-tools.sh
//! cloudstack), and its signatures, errors, async jobs, volumes, load-balancer data plane and
//! virtual-router metadata over HTTP.

use std::net::SocketAddr;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{wait_for, TestCloud};

/// A signed CloudStack client of the test cloud.
struct Cs<'a> {
    c: &'a TestCloud,
    key: String,
    secret: String,
}

/// Java's `URLEncoder` with `+` as `%20`, as CloudStack signs values.
fn encode(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'*' | b'_') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn sign(params: &[(String, String)], secret: &str) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let s = sorted
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
        .to_lowercase();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
    STANDARD.encode(ring::hmac::sign(&key, s.as_bytes()).as_ref())
}

/// The API and secret keys of `user`, read with the test's Keystone token as session key.
async fn keys_of(c: &TestCloud, user: &str) -> (String, String) {
    let r = session(c, &[("command", "listUsers"), ("username", user)]).await;
    assert_eq!(r.0, StatusCode::OK, "{}", r.1);
    let id = r.1["listusersresponse"]["user"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = session(c, &[("command", "getUserKeys"), ("id", &id)]).await;
    assert_eq!(r.0, StatusCode::OK, "{}", r.1);
    let keys = &r.1["getuserkeysresponse"]["userkeys"];
    (
        keys["apikey"].as_str().unwrap().to_owned(),
        keys["secretkey"].as_str().unwrap().to_owned(),
    )
}

async fn session(c: &TestCloud, params: &[(&str, &str)]) -> (StatusCode, Value) {
    let mut all: Vec<(&str, &str)> = vec![("response", "json"), ("sessionkey", &c.token)];
    all.extend_from_slice(params);
    let r = c
        .http
        .get(format!("{}/client/api", c.url))
        .query(&all)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

impl<'a> Cs<'a> {
    async fn new(c: &'a TestCloud) -> Self {
        let (key, secret) = keys_of(c, "admin").await;
        assert_eq!((key.len(), secret.len()), (86, 86));
        Cs { c, key, secret }
    }

    /// `command` with `params`, signed with `secret` (the user's unless told), by GET.
    async fn call_with(
        &self,
        command: &str,
        params: &[(&str, &str)],
        secret: &str,
    ) -> (StatusCode, Value) {
        let mut all: Vec<(String, String)> = vec![
            ("command".into(), command.into()),
            ("apiKey".into(), self.key.clone()),
            ("response".into(), "json".into()),
        ];
        all.extend(
            params
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let signature = sign(&all, secret);
        all.push(("signature".into(), signature));
        let r = self
            .c
            .http
            .get(format!("{}/client/api", self.c.url))
            .query(&all)
            .send()
            .await
            .unwrap();
        let status = r.status();
        assert!(
            r.headers()[reqwest::header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{command}"
        );
        (status, r.json().await.unwrap())
    }

    /// `command` answered 200: the inner object of `<command>response`.
    async fn ok(&self, command: &str, params: &[(&str, &str)]) -> Value {
        let (status, body) = self.call_with(command, params, &self.secret).await;
        assert_eq!(status, StatusCode::OK, "{command}: {body}");
        body[format!("{}response", command.to_lowercase())].clone()
    }

    /// An async command: waits for its job and answers the job's final view.
    async fn run(&self, command: &str, params: &[(&str, &str)]) -> Value {
        let answer = self.ok(command, params).await;
        let job = answer["jobid"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_owned();
        let mut last = Value::Null;
        wait_for(command, Duration::from_secs(5), async || {
            last = self.ok("queryAsyncJobResult", &[("jobid", &job)]).await;
            last["jobstatus"] != 0
        })
        .await;
        last
    }

    /// An async command that must succeed: its `jobresult`.
    async fn done(&self, command: &str, params: &[(&str, &str)]) -> Value {
        let job = self.run(command, params).await;
        assert_eq!(job["jobstatus"], 1, "{command}: {job}");
        assert_eq!(job["jobresultcode"], 0, "{command}: {job}");
        assert_eq!(job["jobresulttype"], "object", "{command}: {job}");
        job["jobresult"].clone()
    }
}

/// The CloudStack error body of a refused call.
fn assert_cs_error(r: &(StatusCode, Value), command: &str, code: u16, says: &str) {
    assert_eq!(r.0.as_u16(), code, "{command}: {}", r.1);
    let e = &r.1[format!("{}response", command.to_lowercase())];
    assert_eq!(e["errorcode"], code, "{}", r.1);
    assert!(e["cserrorcode"].is_number(), "{}", r.1);
    assert_eq!(e["uuidList"], json!([]), "{}", r.1);
    assert!(
        e["errortext"].as_str().unwrap().contains(says),
        "{command}: {} should say {says}",
        r.1
    );
}

async fn running_vm(c: &TestCloud, cs: &Cs<'_>, name: &str) -> Value {
    let id = c.create_server(name, json!({})).await;
    let mut vm = Value::Null;
    wait_for("a Running VM", Duration::from_secs(10), async || {
        vm = cs.ok("listVirtualMachines", &[("id", &id)]).await["virtualmachine"][0].clone();
        vm["state"] == "Running"
    })
    .await;
    vm
}

#[tokio::test]
async fn cs_signs_lists_makes_a_load_balancer_and_polls_its_jobs() {
    let python = hypercloud_testenv::venv_python("venv-cloudstack", "cs", "cloudstack");
    let c = TestCloud::start().await;
    let cs = Cs::new(&c).await;
    let vm = running_vm(&c, &cs, "cs-a").await;
    let script = hypercloud_testenv::repo_root().join("hack/conformance/cloudstack_conformance.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(format!("{}/client/api", c.url))
        .arg(&cs.key)
        .arg(&cs.secret)
        .arg(vm["id"].as_str().unwrap())
        .output()
        .await
        .unwrap();
    hypercloud_testenv::conformance_passed(&out, &script, "\nok");
}

#[tokio::test]
async fn signatures_expiry_and_errors_are_cloudstacks() {
    let c = TestCloud::start().await;
    let cs = Cs::new(&c).await;
    let zones = cs.ok("listZones", &[]).await;
    assert_eq!(zones["count"], 1, "{zones}");
    let zone = &zones["zone"][0];
    assert_eq!(zone["name"], "nova");
    assert_eq!(zone["networktype"], "Advanced");
    assert!(uuid::Uuid::parse_str(zone["id"].as_str().unwrap()).is_ok());
    // The same keys every time; filters by ID.
    assert_eq!(
        keys_of(&c, "admin").await,
        (cs.key.clone(), cs.secret.clone())
    );
    let by_id = cs
        .ok("listZones", &[("id", zone["id"].as_str().unwrap())])
        .await;
    assert_eq!(by_id["count"], 1);

    // Wrong secret, a changed parameter, no signature: 401 with CloudStack's body.
    let wrong = cs.call_with("listZones", &[], "not-the-secret").await;
    assert_cs_error(
        &wrong,
        "listZones",
        401,
        "unable to verify user credentials",
    );
    let mut all = vec![
        ("command".to_owned(), "listZones".to_owned()),
        ("apiKey".to_owned(), cs.key.clone()),
        ("response".to_owned(), "json".to_owned()),
    ];
    let signature = sign(&all, &cs.secret);
    all.push(("signature".into(), signature.clone()));
    all.push(("name".into(), "nova".into()));
    let r = c
        .http
        .get(format!("{}/client/api", c.url))
        .query(&all)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = c
        .http
        .get(format!("{}/client/api", c.url))
        .query(&[("command", "listZones"), ("response", "json")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // POST form, signed the same way.
    let form = vec![
        ("command".to_owned(), "listZones".to_owned()),
        ("apiKey".to_owned(), cs.key.clone()),
        ("response".to_owned(), "json".to_owned()),
        ("signature".to_owned(), signature),
    ];
    let r = c
        .http
        .post(format!("{}/client/api", c.url))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    // Version 3 signatures expire.
    for (expires, status) in [
        ("2020-01-01T00:00:00+0000", 401),
        ("2999-01-01T00:00:00+0000", 200),
        ("soon", 401),
    ] {
        let r = cs
            .call_with(
                "listZones",
                &[("signatureVersion", "3"), ("expires", expires)],
                &cs.secret,
            )
            .await;
        assert_eq!(r.0.as_u16(), status, "{expires}: {}", r.1);
    }
    let r = cs
        .call_with("listZones", &[("signatureVersion", "3")], &cs.secret)
        .await;
    assert_cs_error(&r, "listZones", 401, "unable to verify");

    // Unknown command, missing and wrong parameters.
    let r = cs.call_with("launchRocket", &[], &cs.secret).await;
    assert_cs_error(&r, "launchRocket", 432, "does not exist");
    let r = cs.call_with("attachVolume", &[], &cs.secret).await;
    assert_cs_error(&r, "attachVolume", 431, "missing parameter id");
    let r = cs
        .call_with("listVirtualMachines", &[("projectid", "nope")], &cs.secret)
        .await;
    assert_cs_error(
        &r,
        "listVirtualMachines",
        431,
        "Invalid parameter projectid value=nope",
    );
    let r = cs
        .call_with("queryAsyncJobResult", &[("jobid", "nope")], &cs.secret)
        .await;
    assert_cs_error(&r, "queryAsyncJobResult", 431, "jobid");
    // Unknown parameters are ignored, as CloudStack ignores them.
    assert_eq!(cs.ok("listZones", &[("flavour", "x")]).await["count"], 1);
    // An empty list is `{}`.
    assert_eq!(cs.ok("listVolumes", &[]).await, json!({}));
    assert_eq!(cs.ok("listLoadBalancerRules", &[]).await, json!({}));
    // Offerings.
    let so = cs.ok("listServiceOfferings", &[("name", "m1.small")]).await;
    assert_eq!(so["serviceoffering"][0]["memory"], 2048, "{so}");
    let d = cs.ok("listDiskOfferings", &[]).await;
    assert_eq!(d["count"], 4, "{d}");
    let p = cs.ok("listProjects", &[("name", "demo")]).await;
    assert_eq!(p["project"][0]["id"], c.project.as_str(), "{p}");
    let n = cs.ok("listNetworks", &[]).await;
    assert!(
        n["network"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == "private"),
        "{n}"
    );
    assert!(
        !n["network"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == "public"),
        "{n}"
    );
}

#[tokio::test]
async fn virtual_machines_show_nics_states_and_router_metadata() {
    let c = TestCloud::start().await;
    let cs = Cs::new(&c).await;
    let vm = running_vm(&c, &cs, "node-1").await;
    let id = vm["id"].as_str().unwrap().to_owned();
    assert_eq!(vm["name"], "node-1");
    assert_eq!(vm["displayname"], "node-1");
    assert_eq!(vm["zonename"], "nova");
    assert_eq!(vm["serviceofferingname"], "m1.small");
    assert_eq!(vm["hostname"], "node-1");
    assert_eq!(vm["projectid"], c.project.as_str());
    let nic = &vm["nic"][0];
    let ip = nic["ipaddress"].as_str().unwrap().to_owned();
    assert!(ip.starts_with("127.1."), "{vm}");
    assert_eq!(nic["isdefault"], true);
    assert_eq!(nic["networkname"], "private");
    assert!(nic["macaddress"].as_str().unwrap().contains(':'));
    assert!(nic["networkid"].is_string() && nic["id"].is_string());
    // By name and by keyword, and in all projects.
    let by_name = cs.ok("listVirtualMachines", &[("name", "node-1")]).await;
    assert_eq!(by_name["count"], 1);
    assert_eq!(
        cs.ok("listVirtualMachines", &[("keyword", "node")]).await["count"],
        1
    );
    assert_eq!(
        cs.ok("listVirtualMachines", &[("projectid", "-1")]).await["count"],
        1
    );
    assert_eq!(
        cs.ok("listVirtualMachines", &[("name", "node-2")]).await,
        json!({})
    );
    // Stopped through Nova: Stopped.
    let r = c
        .post(
            &format!("/compute/v2.1/servers/{id}/action"),
            json!({"os-stop": null}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    wait_for("Stopped", Duration::from_secs(10), async || {
        cs.ok("listVirtualMachines", &[("id", &id), ("state", "Stopped")])
            .await["count"]
            == 1
    })
    .await;

    // The virtual router's metadata, for a named VM and for the VM asking.
    let md = c.metadata_url();
    let get = async |path: &str, who: Option<&str>| {
        let mut r = c.http.get(format!("{md}{path}"));
        if let Some(w) = who {
            r = r.header("x-instance-id", w);
        }
        let r = r.send().await.unwrap();
        (r.status(), r.text().await.unwrap())
    };
    for (key, want) in [
        ("instance-id", id.as_str()),
        ("vm-id", id.as_str()),
        ("local-hostname", "node-1"),
        ("availability-zone", "nova"),
        ("service-offering", "m1.small"),
        ("local-ipv4", ip.as_str()),
        ("public-ipv4", ""),
    ] {
        let named = get(&format!("/cloudstack/{id}/latest/meta-data/{key}"), None).await;
        assert_eq!(named, (StatusCode::OK, want.to_owned()), "{key}");
        let asking = get(&format!("/cloudstack/latest/meta-data/{key}"), Some(&id)).await;
        assert_eq!(asking, (StatusCode::OK, want.to_owned()), "{key}");
    }
    let index = get(&format!("/cloudstack/{id}/latest/meta-data/"), None).await;
    assert!(index.1.contains("service-offering"), "{index:?}");
    assert_eq!(
        get(&format!("/cloudstack/{id}/latest/meta-data/nothing"), None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get("/cloudstack/missing/latest/meta-data/instance-id", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn volumes_are_made_attached_resized_and_deleted_through_jobs() {
    let c = TestCloud::start().await;
    let cs = Cs::new(&c).await;
    let vm = running_vm(&c, &cs, "disk-host").await;
    let vm_id = vm["id"].as_str().unwrap().to_owned();
    let offerings = cs.ok("listDiskOfferings", &[("name", "Small")]).await;
    let small = offerings["diskoffering"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let zone = cs.ok("listZones", &[]).await["zone"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Created from an offering: the answer names the volume and its job.
    let answer = cs
        .ok(
            "createVolume",
            &[
                ("name", "data"),
                ("diskofferingid", &small),
                ("zoneid", &zone),
            ],
        )
        .await;
    let vol = answer["id"].as_str().unwrap().to_owned();
    let job = cs
        .done(
            "createVolume",
            &[("name", "data2"), ("size", "3"), ("zoneid", &zone)],
        )
        .await;
    assert_eq!(job["volume"]["size"], 3u64 << 30, "{job}");
    assert_eq!(job["volume"]["diskofferingname"], "Custom");
    let jobid = answer["jobid"].as_str().unwrap();
    let q = cs.ok("queryAsyncJobResult", &[("jobid", jobid)]).await;
    assert_eq!(q["jobstatus"], 1, "{q}");
    assert_eq!(q["jobinstanceid"], vol.as_str());
    let v = &q["jobresult"]["volume"];
    assert_eq!(v["id"], vol.as_str());
    assert_eq!(v["size"], 5u64 << 30);
    assert_eq!(v["type"], "DATADISK");
    assert_eq!(v["state"], "Ready");
    assert_eq!(v["zoneid"], zone.as_str());
    // Cinder sees it.
    let r = c.get(&format!("{}/{vol}", c.volumes())).await;
    assert_eq!(r.body["volume"]["size"], 5, "{}", r.body);
    let r = cs
        .call_with("createVolume", &[("name", "x")], &cs.secret)
        .await;
    assert_cs_error(&r, "createVolume", 431, "Offering");

    // Attached: the VM's volume, device 1; attached again: the job fails, nothing changes.
    let job = cs
        .done(
            "attachVolume",
            &[("id", &vol), ("virtualmachineid", &vm_id)],
        )
        .await;
    assert_eq!(job["volume"]["virtualmachineid"], vm_id.as_str(), "{job}");
    assert_eq!(job["volume"]["deviceid"], 1);
    assert_eq!(job["volume"]["vmname"], "disk-host");
    let failed = cs
        .run(
            "attachVolume",
            &[("id", &vol), ("virtualmachineid", &vm_id)],
        )
        .await;
    assert_eq!(failed["jobstatus"], 2, "{failed}");
    assert_eq!(failed["jobresultcode"], 530);
    assert_eq!(failed["jobresult"]["errorcode"], 530);
    assert!(failed["jobresult"]["errortext"]
        .as_str()
        .unwrap()
        .contains("already attached"));
    let listed = cs.ok("listVolumes", &[("virtualmachineid", &vm_id)]).await;
    assert_eq!(listed["count"], 1, "{listed}");
    // Deleting an attached volume is refused at once.
    let r = cs
        .call_with("deleteVolume", &[("id", &vol)], &cs.secret)
        .await;
    assert_cs_error(&r, "deleteVolume", 431, "not attached");

    // Resized (grown only), detached, deleted.
    let job = cs
        .done("resizeVolume", &[("id", &vol), ("size", "8")])
        .await;
    assert_eq!(job["volume"]["size"], 8u64 << 30, "{job}");
    let shrink = cs.run("resizeVolume", &[("id", &vol), ("size", "2")]).await;
    assert_eq!(shrink["jobstatus"], 2, "{shrink}");
    let job = cs.done("detachVolume", &[("id", &vol)]).await;
    assert!(job["volume"]["virtualmachineid"].is_null(), "{job}");
    let gone = cs.ok("deleteVolume", &[("id", &vol)]).await;
    assert_eq!(gone, json!({"success": "true"}));
    assert_eq!(cs.ok("listVolumes", &[("id", &vol)]).await, json!({}));
}

/// A TCP server on `addr` that answers every connection with `name` and closes.
async fn backend(addr: SocketAddr, name: &'static str) {
    let l = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(name.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
}

/// What the backend behind `addr` says (`None`: refused, or closed without a word).
async fn ask(addr: SocketAddr) -> Option<String> {
    let s = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await;
    let mut s = s.ok()?.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    (!out.is_empty()).then_some(out)
}

async fn serving(addr: SocketAddr, want: Option<&str>) {
    wait_for(
        &format!("{addr} to answer {want:?}"),
        Duration::from_secs(5),
        async || ask(addr).await.as_deref() == want,
    )
    .await;
}

#[tokio::test]
async fn load_balancer_rules_carry_traffic_that_firewall_rules_admit() {
    let c = TestCloud::start_with(|c| hypercloud_localcloud::ServerConfig {
        lb_vip_pool: "127.1.236.0/24".parse().unwrap(),
        ..c
    })
    .await;
    let cs = Cs::new(&c).await;
    let vm = running_vm(&c, &cs, "web-1").await;
    let vm_id = vm["id"].as_str().unwrap().to_owned();
    let network = vm["nic"][0]["networkid"].as_str().unwrap().to_owned();
    let vm_ip = vm["nic"][0]["ipaddress"].as_str().unwrap().to_owned();
    let private_port = crate::support::free_port(&vm_ip).await;
    backend(format!("{vm_ip}:{private_port}").parse().unwrap(), "web-1").await;

    // A public IP for the network.
    let job = cs
        .done("associateIpAddress", &[("networkid", &network)])
        .await;
    let ip = &job["ipaddress"];
    let ip_id = ip["id"].as_str().unwrap().to_owned();
    let address = ip["ipaddress"].as_str().unwrap().to_owned();
    assert!(address.starts_with("127.24.4."), "{ip}");
    assert_eq!(ip["associatednetworkid"], network.as_str());
    let listed = cs
        .ok("listPublicIpAddresses", &[("ipaddress", &address)])
        .await;
    assert_eq!(
        listed["publicipaddress"][0]["id"],
        ip_id.as_str(),
        "{listed}"
    );
    let public_port = crate::support::free_port(&address).await;
    let through: SocketAddr = format!("{address}:{public_port}").parse().unwrap();

    // A rule without its firewall rule: nobody gets in.
    let (pp, qp) = (private_port.to_string(), public_port.to_string());
    let job = cs
        .done(
            "createLoadBalancerRule",
            &[
                ("publicipid", &ip_id),
                ("name", "svc-http"),
                ("algorithm", "roundrobin"),
                ("privateport", &pp),
                ("publicport", &qp),
                ("protocol", "TCP"),
                ("networkid", &network),
                ("openfirewall", "false"),
            ],
        )
        .await;
    let rule = &job["loadbalancer"];
    let rule_id = rule["id"].as_str().unwrap().to_owned();
    assert_eq!(rule["publicport"], qp.as_str(), "{rule}");
    assert_eq!(rule["privateport"], pp.as_str());
    assert_eq!(rule["publicip"], address.as_str());
    assert_eq!(rule["algorithm"], "roundrobin");
    assert_eq!(rule["protocol"], "tcp");
    let job = cs
        .done(
            "assignToLoadBalancerRule",
            &[("id", &rule_id), ("virtualmachineids", &vm_id)],
        )
        .await;
    assert_eq!(job["success"], true, "{job}");
    let members = cs
        .ok("listLoadBalancerRuleInstances", &[("id", &rule_id)])
        .await;
    assert_eq!(
        members["loadbalancerruleinstance"][0]["id"],
        vm_id.as_str(),
        "{members}"
    );
    let rules = cs
        .ok("listLoadBalancerRules", &[("publicipid", &ip_id)])
        .await;
    assert_eq!(rules["loadbalancerrule"][0]["name"], "svc-http", "{rules}");
    // The Octavia load balancer exists (the data plane listens), refusing every source.
    let lbs = c
        .get(&format!(
            "{}/loadbalancers?name=cloudstack-{ip_id}",
            crate::support::LBAAS
        ))
        .await;
    assert_eq!(lbs.count("loadbalancers"), 1, "{}", lbs.body);
    serving(through, None).await;

    // A firewall rule for loopback sources: traffic flows; another source range only: not.
    let job = cs
        .done(
            "createFirewallRule",
            &[
                ("ipaddressid", &ip_id),
                ("protocol", "tcp"),
                ("startport", &qp),
                ("endport", &qp),
                ("cidrlist", "127.0.0.0/8"),
            ],
        )
        .await;
    let fw = job["firewallrule"]["id"].as_str().unwrap().to_owned();
    assert_eq!(job["firewallrule"]["cidrlist"], "127.0.0.0/8", "{job}");
    assert_eq!(job["firewallrule"]["startport"], public_port);
    serving(through, Some("web-1")).await;
    let listed = cs.ok("listFirewallRules", &[("ipaddressid", &ip_id)]).await;
    assert_eq!(listed["count"], 1, "{listed}");
    cs.done("deleteFirewallRule", &[("id", &fw)]).await;
    serving(through, None).await;
    cs.done(
        "createFirewallRule",
        &[
            ("ipaddressid", &ip_id),
            ("protocol", "tcp"),
            ("startport", "1"),
            ("endport", "65535"),
            ("cidrlist", "10.0.0.0/8"),
        ],
    )
    .await;
    serving(through, None).await;

    // The VM removed: no backend; the rule deleted: the listener closes.
    cs.done(
        "removeFromLoadBalancerRule",
        &[("id", &rule_id), ("virtualmachineids", &vm_id)],
    )
    .await;
    assert_eq!(
        cs.ok("listLoadBalancerRuleInstances", &[("id", &rule_id)])
            .await,
        json!({})
    );
    let again = cs
        .run(
            "removeFromLoadBalancerRule",
            &[("id", &rule_id), ("virtualmachineids", &vm_id)],
        )
        .await;
    assert_eq!(again["jobstatus"], 2, "{again}");
    cs.done("deleteLoadBalancerRule", &[("id", &rule_id)]).await;
    let lbs = c
        .get(&format!(
            "{}/loadbalancers?name=cloudstack-{ip_id}",
            crate::support::LBAAS
        ))
        .await;
    assert_eq!(lbs.count("loadbalancers"), 0, "{}", lbs.body);

    // openfirewall (CloudStack's default): the rule opens its port to everyone.
    let job = cs
        .done(
            "createLoadBalancerRule",
            &[
                ("publicipid", &ip_id),
                ("name", "svc-open"),
                ("algorithm", "leastconn"),
                ("privateport", &pp),
                ("publicport", &qp),
            ],
        )
        .await;
    let open_id = job["loadbalancer"]["id"].as_str().unwrap().to_owned();
    assert_eq!(job["loadbalancer"]["networkid"], network.as_str(), "{job}");
    cs.done(
        "assignToLoadBalancerRule",
        &[("id", &open_id), ("virtualmachineids", &vm_id)],
    )
    .await;
    serving(through, Some("web-1")).await;
    let fws = cs.ok("listFirewallRules", &[("ipaddressid", &ip_id)]).await;
    assert!(
        fws["firewallrule"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["cidrlist"] == "0.0.0.0/0"),
        "{fws}"
    );
    // A second rule on the same port: the job fails.
    let clash = cs
        .run(
            "createLoadBalancerRule",
            &[
                ("publicipid", &ip_id),
                ("name", "svc-dup"),
                ("algorithm", "source"),
                ("privateport", &pp),
                ("publicport", &qp),
            ],
        )
        .await;
    assert_eq!(clash["jobstatus"], 2, "{clash}");

    // Released: its rules go, the address stops answering.
    let job = cs.done("disassociateIpAddress", &[("id", &ip_id)]).await;
    assert_eq!(job["success"], true);
    serving(through, None).await;
    assert_eq!(cs.ok("listLoadBalancerRules", &[]).await, json!({}));
    assert_eq!(cs.ok("listFirewallRules", &[]).await, json!({}));
    assert_eq!(
        cs.ok("listPublicIpAddresses", &[("id", &ip_id)]).await,
        json!({})
    );
}

#[tokio::test]
async fn stuck_jobs_stay_pending() {
    let c = TestCloud::start_with(|c| hypercloud_localcloud::ServerConfig {
        cloudstack_stuck_jobs: true,
        ..c
    })
    .await;
    let cs = Cs::new(&c).await;
    let zone = cs.ok("listZones", &[]).await["zone"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = cs.ok("associateIpAddress", &[("zoneid", &zone)]).await;
    let job = answer["jobid"].as_str().unwrap();
    for _ in 0..3 {
        let q = cs.ok("queryAsyncJobResult", &[("jobid", job)]).await;
        assert_eq!(q["jobstatus"], 0, "{q}");
        assert!(q.get("jobresult").is_none(), "{q}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
