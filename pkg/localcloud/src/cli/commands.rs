//! The operator commands (`instance`, `volume`, `status`) and their table/JSON output.

use super::*;

pub(super) fn print(output: Output, value: &Value, table: impl FnOnce() -> Vec<Vec<String>>) {
    match output {
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        ),
        Output::Table => print_table(&table()),
    }
}

pub(super) fn print_table(rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, cell)| format!("{cell:<w$}", w = widths[i]))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}

pub(super) fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub(super) fn server_row(srv: &Value) -> Vec<String> {
    let addrs: Vec<String> = srv["addresses"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(net, list)| {
                    let ips: Vec<String> = list
                        .as_array()
                        .map(|l| l.iter().map(|a| s(&a["addr"])).collect())
                        .unwrap_or_default();
                    format!("{net}={}", ips.join(","))
                })
                .collect()
        })
        .unwrap_or_default();
    vec![
        s(&srv["id"]),
        s(&srv["name"]),
        s(&srv["status"]),
        s(&srv["OS-EXT-AZ:availability_zone"]),
        s(&srv["flavor"]["original_name"]),
        addrs.join("; "),
    ]
}

pub(super) const SERVER_HEADER: [&str; 6] = ["ID", "NAME", "STATUS", "ZONE", "FLAVOR", "ADDRESSES"];

pub(super) async fn server_detail(client: &Client, id: &str) -> Result<Value> {
    let v = client
        .get_compute(&format!("/compute/v2.1/servers/{id}"))
        .await?;
    Ok(v["server"].clone())
}

pub(super) async fn instance(client: &Client, cmd: InstanceCommand) -> Result<()> {
    match cmd {
        InstanceCommand::Create {
            name,
            zone,
            flavor,
            address,
            network,
            output,
        } => {
            let nets = client.get("/network/v2.0/networks").await?;
            let net = nets["networks"]
                .as_array()
                .and_then(|l| {
                    l.iter()
                        .find(|n| n["id"] == network.as_str() || n["name"] == network.as_str())
                })
                .and_then(|n| n["id"].as_str().map(str::to_owned))
                .ok_or_else(|| Error::NotFound {
                    what: "network",
                    name: network.clone(),
                })?;
            let mut nic = json!({"uuid": net});
            if let Some(ip) = address {
                nic["fixed_ip"] = json!(ip);
            }
            let created = client
                .call(
                    Method::POST,
                    "/compute/v2.1/servers",
                    Some(json!({"server": {"name": name, "flavorRef": flavor, "availability_zone": zone, "networks": [nic]}})),
                )
                .await?;
            let id = s(&created["server"]["id"]);
            let detail = server_detail(client, &id).await?;
            print(output.output, &detail, || {
                vec![
                    SERVER_HEADER.map(String::from).to_vec(),
                    server_row(&detail),
                ]
            });
        }
        InstanceCommand::Delete { name } => {
            let srv = client.find_server(&name).await?;
            client
                .call(
                    Method::DELETE,
                    &format!("/compute/v2.1/servers/{}", s(&srv["id"])),
                    None,
                )
                .await?;
            println!("deleted instance {} ({})", s(&srv["name"]), s(&srv["id"]));
        }
        InstanceCommand::Stop { name } => power(client, &name, "os-stop", "stopped").await?,
        InstanceCommand::Start { name } => power(client, &name, "os-start", "started").await?,
        InstanceCommand::List(out) => {
            let all = client.get_compute("/compute/v2.1/servers/detail").await?;
            let servers = all["servers"].clone();
            print(out.output, &servers, || {
                let mut rows = vec![SERVER_HEADER.map(String::from).to_vec()];
                rows.extend(servers.as_array().into_iter().flatten().map(server_row));
                rows
            });
        }
    }
    Ok(())
}

pub(super) async fn power(client: &Client, name: &str, action: &str, done: &str) -> Result<()> {
    let srv = client.find_server(name).await?;
    client
        .call(
            Method::POST,
            &format!("/compute/v2.1/servers/{}/action", s(&srv["id"])),
            Some(json!({ action: null })),
        )
        .await?;
    println!("{done} instance {} ({})", s(&srv["name"]), s(&srv["id"]));
    Ok(())
}

pub(super) fn volume_row(v: &Value) -> Vec<String> {
    let attached: Vec<String> = v["attachments"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|a| format!("{} on {}", s(&a["device"]), s(&a["server_id"])))
                .collect()
        })
        .unwrap_or_default();
    vec![
        s(&v["id"]),
        s(&v["name"]),
        s(&v["status"]),
        s(&v["size"]),
        s(&v["availability_zone"]),
        attached.join(", "),
    ]
}

pub(super) const VOLUME_HEADER: [&str; 6] = ["ID", "NAME", "STATUS", "SIZE", "ZONE", "ATTACHED"];

pub(super) async fn volume(client: &Client, cmd: VolumeCommand) -> Result<()> {
    let base = format!("/volume/v3/{}/volumes", client.project_id);
    match cmd {
        VolumeCommand::Create {
            name,
            size,
            zone,
            output,
        } => {
            let created = client
                .call(
                    Method::POST,
                    &base,
                    Some(
                        json!({"volume": {"name": name, "size": size, "availability_zone": zone}}),
                    ),
                )
                .await?;
            let v = created["volume"].clone();
            print(output.output, &v, || {
                vec![VOLUME_HEADER.map(String::from).to_vec(), volume_row(&v)]
            });
        }
        VolumeCommand::Delete { name } => {
            let v = client.find_volume(&name).await?;
            client
                .call(Method::DELETE, &format!("{base}/{}", s(&v["id"])), None)
                .await?;
            println!("deleted volume {} ({})", s(&v["name"]), s(&v["id"]));
        }
        VolumeCommand::List(out) => {
            let all = client.get(&format!("{base}/detail")).await?;
            let vols = all["volumes"].clone();
            print(out.output, &vols, || {
                let mut rows = vec![VOLUME_HEADER.map(String::from).to_vec()];
                rows.extend(vols.as_array().into_iter().flatten().map(volume_row));
                rows
            });
        }
    }
    Ok(())
}

pub(super) async fn status(state_dir: &Path, password: &str, out: OutputArgs) -> Result<()> {
    let running = store::is_locked(state_dir);
    let client = Client::connect(state_dir, password).await?;
    let count = |v: &Value, key: &str| v[key].as_array().map_or(0, Vec::len);
    let servers = client.get("/compute/v2.1/servers/detail").await?;
    let shutoff = servers["servers"]
        .as_array()
        .map_or(0, |l| l.iter().filter(|s| s["status"] == "SHUTOFF").count());
    let volumes = client
        .get(&format!("/volume/v3/{}/volumes", client.project_id))
        .await?;
    let networks = client.get("/network/v2.0/networks").await?;
    let routers = client.get("/network/v2.0/routers").await?;
    let fips = client.get("/network/v2.0/floatingips").await?;
    // What only the running server knows: its volume backing (server.json).
    let info: Value = if running {
        std::fs::read_to_string(state_dir.join(crate::server::SERVER_FILE))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    } else {
        Value::Null
    };
    let backing = match (&info["volume_backing"], &info["loop_devices_unavailable"]) {
        (Value::String(mode), Value::String(why)) => {
            json!(format!("{mode} (no loop devices: {why})"))
        }
        (Value::String(mode), _) => json!(mode),
        _ => Value::Null,
    };
    let summary = json!({
        "running": running,
        "volume_backing": backing,
        "devices_dir": info["devicesDir"],
        "api_url": if running { Some(client.base.clone()) } else { None },
        "state_dir": state_dir.display().to_string(),
        "instances": count(&servers, "servers"),
        "instances_shutoff": shutoff,
        "volumes": count(&volumes, "volumes"),
        "networks": count(&networks, "networks"),
        "routers": count(&routers, "routers"),
        "floating_ips": count(&fips, "floatingips"),
    });
    client.close().await?;
    print(out.output, &summary, || {
        let mut rows = vec![
            vec![
                "running".into(),
                if running {
                    format!("yes, at {}", s(&summary["api_url"]))
                } else {
                    "no (state read offline)".into()
                },
            ],
            vec!["state dir".into(), s(&summary["state_dir"])],
        ];
        if running {
            rows.push(vec!["volume backing".into(), s(&summary["volume_backing"])]);
            if summary["devices_dir"].is_string() {
                rows.push(vec!["devices dir".into(), s(&summary["devices_dir"])]);
            }
        }
        for key in [
            "instances",
            "instances_shutoff",
            "volumes",
            "networks",
            "routers",
            "floating_ips",
        ] {
            rows.push(vec![key.replace('_', " "), s(&summary[key])]);
        }
        rows
    });
    Ok(())
}
