//! The Azure instance metadata service: VMs made through Resource Manager read their instance
//! document (compute, network, leaves as text) and get managed identity tokens Resource
//! Manager accepts; a Nova server that is no Azure VM, a request without `Metadata: true` or
//! with `X-Forwarded-For` are refused as IMDS refuses them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::azure::{guid, start, Azure, TENANT, V};

/// What [`arm_vms`] made: the subscription and the ARM bodies of what the test checks.
pub struct Made {
    pub sub: String,
    /// The VMs, as ARM shows them.
    pub vms: Vec<Value>,
    /// The first VM's NIC and its public IP.
    pub nic: Value,
    pub pip: Value,
}

/// `PUT` through Resource Manager, which must answer 200 or 201; the body.
async fn put(az: &Azure, token: &str, path: &str, body: Value) -> Value {
    let a = az
        .call(Method::PUT, &format!("{path}?{V}"), Some(token), Some(body))
        .await;
    assert!(
        matches!(a.status, StatusCode::OK | StatusCode::CREATED),
        "PUT {path}: {} {}",
        a.status,
        a.body
    );
    a.body
}

/// In group `group`: a virtual network, an availability set (2 fault domains), and one VM per
/// name in it, each with a NIC; the first NIC has a public IP. Through ARM, as the SDK does.
pub async fn arm_vms(az: &Azure, token: &str, group: &str, names: &[&str]) -> Made {
    let subs = az
        .call(
            Method::GET,
            &format!("/subscriptions?{V}"),
            Some(token),
            None,
        )
        .await;
    let sub = subs.body["value"][0]["subscriptionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let rg = format!("/subscriptions/{sub}/resourceGroups/{group}");
    put(az, token, &rg, json!({"location": "regionone"})).await;
    let vnet = put(
        az,
        token,
        &format!("{rg}/providers/Microsoft.Network/virtualNetworks/vnet"),
        json!({"location": "regionone", "properties": {
            "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "s1", "properties": {"addressPrefix": "10.0.1.0/24"}}]}}),
    )
    .await;
    let subnet = vnet["properties"]["subnets"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let pip = put(
        az,
        token,
        &format!("{rg}/providers/Microsoft.Network/publicIPAddresses/pip-1"),
        json!({"location": "regionone", "sku": {"name": "Standard"},
               "properties": {"publicIPAllocationMethod": "Static"}}),
    )
    .await;
    let aset = put(
        az,
        token,
        &format!("{rg}/providers/Microsoft.Compute/availabilitySets/aset"),
        json!({"location": "regionone", "sku": {"name": "Aligned"}, "properties": {
            "platformFaultDomainCount": 2, "platformUpdateDomainCount": 5}}),
    )
    .await;
    let mut vms = Vec::new();
    let mut first_nic = Value::Null;
    for (i, name) in names.iter().enumerate() {
        let mut ipc = json!({"subnet": {"id": subnet}, "privateIPAllocationMethod": "Dynamic",
                             "primary": true});
        if i == 0 {
            ipc["publicIPAddress"] = json!({"id": pip["id"]});
        }
        let nic = put(
            az,
            token,
            &format!("{rg}/providers/Microsoft.Network/networkInterfaces/{name}-nic"),
            json!({"location": "regionone", "properties": {
                "ipConfigurations": [{"name": "ipconfig1", "properties": ipc}]}}),
        )
        .await;
        let vm = put(
            az,
            token,
            &format!("{rg}/providers/Microsoft.Compute/virtualMachines/{name}"),
            json!({"location": "regionone", "tags": {"role": "node", "env": "test"}, "properties": {
                "hardwareProfile": {"vmSize": "Standard_B2s"},
                "availabilitySet": {"id": aset["id"]},
                "osProfile": {"computerName": name, "adminUsername": "azureuser",
                              "adminPassword": "Imds-Test-Pw-1!",
                              "linuxConfiguration": {"disablePasswordAuthentication": true}},
                "storageProfile": {
                    "imageReference": {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy",
                                       "sku": "22_04-lts-gen2", "version": "latest"},
                    "osDisk": {"createOption": "FromImage"}},
                "networkProfile": {"networkInterfaces": [{"id": nic["id"], "properties": {"primary": true}}]}}}),
        )
        .await;
        if i == 0 {
            first_nic = nic;
        }
        vms.push(vm);
    }
    // The NIC and public IP as they are now (with the VM and the address).
    let read = |id: &str| format!("{id}?{V}");
    let nic = az
        .call(
            Method::GET,
            &read(first_nic["id"].as_str().unwrap()),
            Some(token),
            None,
        )
        .await
        .body;
    let pip = az
        .call(
            Method::GET,
            &read(pip["id"].as_str().unwrap()),
            Some(token),
            None,
        )
        .await
        .body;
    Made { sub, vms, nic, pip }
}

/// Asks the metadata listener for `path` as the instance `who` (`X-Instance-ID`).
async fn imds(
    az: &Azure,
    path: &str,
    who: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, String, Option<String>) {
    let url = format!("http://{}{path}", az.handle.metadata_addr().unwrap());
    let mut req = reqwest::Client::new().get(url).header("X-Instance-ID", who);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, resp.text().await.unwrap(), ct)
}

async fn imds_json(az: &Azure, path: &str, who: &str) -> (StatusCode, Value) {
    let (status, body, _) = imds(az, path, who, &[("Metadata", "true")]).await;
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

#[tokio::test]
async fn vms_read_their_instance_metadata_and_get_managed_identity_tokens() {
    let az = start().await;
    let user = guid(&az.user_id().await);
    let token = az.token(&user, "hypercloud").await;
    let made = arm_vms(&az, &token, "imds-rg", &["vm-1", "vm-2"]).await;
    let vm = &made.vms[0];
    let q = "api-version=2021-02-01";

    let (status, doc) = imds_json(&az, &format!("/metadata/instance?{q}"), "vm-1").await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    let c = &doc["compute"];
    assert_eq!(c["name"], "vm-1");
    assert_eq!(c["vmId"], vm["properties"]["vmId"]);
    assert_eq!(c["location"], "regionone");
    assert_eq!(c["vmSize"], "Standard_B2s");
    assert_eq!(c["resourceGroupName"], "imds-rg");
    assert_eq!(c["subscriptionId"], made.sub);
    assert!(
        c["resourceId"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case(vm["id"].as_str().unwrap()),
        "{c}"
    );
    assert_eq!(c["osProfile"]["computerName"], "vm-1");
    assert_eq!(c["osProfile"]["adminUsername"], "azureuser");
    assert_eq!(c["osProfile"]["disablePasswordAuthentication"], "true");
    assert_eq!(c["osType"], "Linux");
    assert_eq!(c["publisher"], "Canonical");
    assert_eq!(c["zone"], "");
    assert_eq!(c["tags"], "env:test;role:node");
    assert_eq!(
        c["tagsList"],
        json!([{"name": "env", "value": "test"}, {"name": "role", "value": "node"}])
    );
    // Every value a string, as IMDS writes them.
    assert!(c["platformUpdateDomain"].is_string(), "{c}");
    let nic = &doc["network"]["interface"][0];
    let ipc = &made.nic["properties"]["ipConfigurations"][0]["properties"];
    assert_eq!(
        nic["ipv4"]["ipAddress"][0],
        json!({"privateIpAddress": ipc["privateIPAddress"],
               "publicIpAddress": made.pip["properties"]["ipAddress"]}),
        "{doc}"
    );
    assert!(
        made.pip["properties"]["ipAddress"].is_string(),
        "{}",
        made.pip
    );
    assert_eq!(
        nic["ipv4"]["subnet"],
        json!([{"address": "10.0.1.0", "prefix": "24"}])
    );
    let mac = made.nic["properties"]["macAddress"].as_str().unwrap();
    assert_eq!(nic["macAddress"], mac.replace('-', ""), "{doc}");
    assert_eq!(nic["macAddress"].as_str().unwrap().len(), 12);

    // Fault and update domains are the instance view's: two VMs in a set of two fault domains
    // (ordered by creation, then ID: which one is first is not known) get one each.
    let mut faults = Vec::new();
    for (i, name) in ["vm-1", "vm-2"].iter().enumerate() {
        let view = az
            .call(
                Method::GET,
                &format!("{}/instanceView?{V}", made.vms[i]["id"].as_str().unwrap()),
                Some(&token),
                None,
            )
            .await
            .body;
        let (_, compute) = imds_json(&az, &format!("/metadata/instance/compute?{q}"), name).await;
        for key in ["platformFaultDomain", "platformUpdateDomain"] {
            assert_eq!(
                compute[key].as_str().unwrap(),
                view[key].to_string(),
                "{name} {key}: {view}"
            );
        }
        faults.push(compute["platformFaultDomain"].as_str().unwrap().to_owned());
    }
    faults.sort();
    assert_eq!(faults, ["0", "1"]);

    // Parts of the document, and leaves as text.
    let (status, compute) =
        imds_json(&az, &format!("/metadata/instance/compute?{q}"), "vm-1").await;
    assert_eq!((status, &compute), (StatusCode::OK, c));
    let (_, network) = imds_json(&az, &format!("/metadata/instance/network?{q}"), "vm-1").await;
    assert_eq!(network, doc["network"]);
    let (status, text, ct) = imds(
        &az,
        &format!("/metadata/instance/compute/vmId?{q}&format=text"),
        "vm-1",
        &[("Metadata", "true")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text, vm["properties"]["vmId"].as_str().unwrap());
    assert!(ct.unwrap().starts_with("text/plain"));
    let (_, public, _) = imds(
        &az,
        &format!("/metadata/instance/network/interface/0/ipv4/ipAddress/0/publicIpAddress?{q}&format=text"),
        "vm-1",
        &[("Metadata", "true")],
    )
    .await;
    assert_eq!(
        public,
        made.pip["properties"]["ipAddress"].as_str().unwrap()
    );
    // Refusals, in IMDS's words.
    for (path, headers, status, says) in [
        (
            format!("/metadata/instance?{q}"),
            vec![],
            400,
            "Required metadata header not specified",
        ),
        (
            format!("/metadata/instance?{q}"),
            vec![("Metadata", "true"), ("X-Forwarded-For", "10.0.1.4")],
            400,
            "X-Forwarded-For",
        ),
        (
            "/metadata/instance".to_owned(),
            vec![("Metadata", "true")],
            400,
            "api-version was not specified",
        ),
        (
            format!("/metadata/instance/compute/vmId?{q}"),
            vec![("Metadata", "true")],
            400,
            "format=text",
        ),
        (
            format!("/metadata/instance/compute?{q}&format=text"),
            vec![("Metadata", "true")],
            400,
            "leaf",
        ),
        (
            format!("/metadata/instance/compute/nothing?{q}"),
            vec![("Metadata", "true")],
            404,
            "Not found",
        ),
    ] {
        let (got, body, _) = imds(&az, &path, "vm-1", &headers).await;
        assert_eq!(got.as_u16(), status, "{path} {headers:?}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert!(
            body["error"].as_str().unwrap().contains(says),
            "{path}: {body}"
        );
    }
    let (_, body) = imds_json(&az, "/metadata/instance", "vm-1").await;
    assert!(body["newest-versions"].is_array(), "{body}");
    let (status, body) = imds_json(&az, "/metadata/versions", "vm-1").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["apiVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2021-02-01")));

    // A Nova server that is not an Azure VM gets IMDS's 404.
    crate::azure_certificates::local_cloud(&az.state, &["instance", "create", "plain-nova"])
        .await
        .unwrap();
    let (status, body) = imds_json(&az, &format!("/metadata/instance?{q}"), "plain-nova").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("not an Azure virtual machine"),
        "{body}"
    );

    // The managed identity: a token Resource Manager accepts, standing for the VM's owner.
    let resource = "https://management.azure.com";
    let path =
        format!("/metadata/identity/oauth2/token?api-version=2018-02-01&resource={resource}");
    let (status, body) = imds_json(&az, &path, "vm-1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for field in ["expires_in", "expires_on", "not_before", "ext_expires_in"] {
        let v = body[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field}: {body}"));
        assert!(v.parse::<u64>().is_ok(), "{field}: {v}");
    }
    assert!(body["expires_in"].as_str().unwrap().parse::<u64>().unwrap() > 0);
    assert_eq!(body["resource"], resource);
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["client_id"], user);
    let access = body["access_token"].as_str().unwrap();
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["tid"], TENANT, "{claims}");
    assert_eq!(claims["aud"], resource);
    assert_eq!(claims["oid"], user);
    assert!(
        claims["xms_mirid"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case(vm["id"].as_str().unwrap()),
        "{claims}"
    );
    let a = az
        .call(
            Method::GET,
            &format!("{}?{V}", vm["id"].as_str().unwrap()),
            Some(access),
            None,
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    // Naming the VM's identity is fine; naming another is IMDS's "Identity not found".
    let (status, _) = imds_json(&az, &format!("{path}&client_id={user}"), "vm-1").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = imds_json(
        &az,
        &format!("{path}&msi_res_id={}", vm["id"].as_str().unwrap()),
        "vm-1",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    for (query, headers, status, says) in [
        (
            format!("{path}&client_id=00000000-0000-0000-0000-000000000001"),
            vec![("Metadata", "true")],
            400,
            "Identity not found",
        ),
        (
            path.clone(),
            vec![],
            400,
            "Required metadata header not specified",
        ),
        (
            "/metadata/identity/oauth2/token?api-version=2018-02-01".to_owned(),
            vec![("Metadata", "true")],
            400,
            "audience",
        ),
        (
            path.clone(),
            vec![("Metadata", "true")],
            404,
            "not an Azure virtual machine",
        ),
    ] {
        let who = if status == 404 { "plain-nova" } else { "vm-1" };
        let (got, body, _) = imds(&az, &query, who, &headers).await;
        assert_eq!(got.as_u16(), status, "{query}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], "invalid_request", "{body}");
        assert!(
            body["error_description"].as_str().unwrap().contains(says),
            "{query}: {body}"
        );
    }
    az.handle.shutdown().await.unwrap();
}
