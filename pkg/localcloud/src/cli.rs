//! The `hypercloud local-cloud` command line: `serve` runs the cloud in the foreground; the
//! operator commands (`instance`, `volume`, `status`) are API clients. When a server holds the
//! state directory they talk to it (its URL is in `<state-dir>/server.json`); otherwise they
//! start the cloud in-process on a free loopback port against the same state directory, run
//! the command through the same API, and stop it. Either way every change goes through the API
//! code and its checks, and is on disk when the command returns.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::faults::{self, Faults, Latency, Rate};
use crate::server::SERVER_FILE;
use crate::{defaults, store, Error, Result, Server, ServerConfig, ServerHandle, TlsFiles};

/// `hypercloud local-cloud`: a one-machine OpenStack-compatible cloud.
#[derive(Debug, clap::Args)]
pub struct LocalCloudArgs {
    /// State directory: the durable state, lock file and config drives
    /// (default: $HOME/.local/share/hypercloud/local-cloud).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "HYPERCLOUD_LOCAL_CLOUD_STATE_DIR",
        help_heading = "Local cloud flags"
    )]
    pub state_dir: Option<PathBuf>,

    /// Password of the admin user (the server's --password).
    #[arg(long, global = true, value_name = "PASSWORD", env = "HYPERCLOUD_LOCAL_CLOUD_PASSWORD", default_value = defaults::PASSWORD, hide_default_value = true, help_heading = "Local cloud flags")]
    pub password: String,

    #[command(subcommand)]
    pub command: Command,
}

/// What `hypercloud local-cloud` does.
#[derive(Debug, clap::Subcommand)]
// Parsed once at start-up; boxing the big variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Run the cloud (API and metadata service) in the foreground until interrupted.
    Serve(ServeArgs),
    /// Manage instances (Nova servers) through the API of the server running on the state
    /// directory, or of an in-process one when none is running.
    #[command(subcommand)]
    Instance(InstanceCommand),
    /// Manage volumes (Cinder volumes), like `instance`.
    #[command(subcommand)]
    Volume(VolumeCommand),
    /// Show whether the cloud is running, where, and what it holds.
    Status(OutputArgs),
}

/// Flags of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// API listen address (all services, DevStack-style path prefixes).
    #[arg(long, default_value = defaults::API_LISTEN, env = "HYPERCLOUD_LOCAL_CLOUD_LISTEN")]
    pub listen: SocketAddr,
    /// Metadata service listen address (the role of 169.254.169.254).
    #[arg(long, default_value = defaults::METADATA_LISTEN)]
    pub metadata_listen: SocketAddr,
    /// Do not run the metadata service.
    #[arg(long)]
    pub no_metadata: bool,
    /// Where config drives are written (default: <state-dir>/config-drive).
    #[arg(long, value_name = "DIR")]
    pub config_drive_dir: Option<PathBuf>,
    /// URL clients use to reach the API, if not http://<listen> (e.g. behind a proxy).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Region name in the service catalog.
    #[arg(long, default_value = defaults::REGION)]
    pub region: String,
    /// Availability zones, comma-separated (replaces the stored set; kept across restarts).
    #[arg(long, value_delimiter = ',', value_name = "ZONES")]
    pub availability_zones: Option<Vec<String>>,
    /// Token lifetime (e.g. 1h is Keystone's default; 90s, 5m).
    #[arg(long, default_value = "3600s", value_parser = parse_ttl)]
    pub token_ttl: Duration,
    /// Added latency, globally and/or per service: `200ms` or `compute=2s,network=50ms`.
    #[arg(long, value_name = "[SERVICE=]DURATION,...")]
    pub inject_latency: Option<Latency>,
    /// Share of requests answered 500, globally and/or per service: `0.1` or `volume=0.5`.
    #[arg(long, value_name = "[SERVICE=]RATE,...")]
    pub inject_error_rate: Option<Rate>,
    /// Share of requests answered 429 with Retry-After, globally and/or per service.
    #[arg(long, value_name = "[SERVICE=]RATE,...")]
    pub inject_throttle_rate: Option<Rate>,
    /// PEM certificate (chain): serve the API over HTTPS.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Loopback addresses load balancer VIPs are allocated from (listeners bind there).
    #[arg(long, value_name = "CIDR", default_value = "127.0.100.0/24")]
    pub lb_vip_pool: crate::lb::VipPool,
}

fn parse_ttl(s: &str) -> std::result::Result<Duration, String> {
    if let Some(h) = s.strip_suffix('h') {
        return faults::parse_duration(&format!("{h}m")).map(|d| d * 60);
    }
    let d = faults::parse_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err("the token lifetime must be at least 1s".into());
    }
    Ok(d)
}

/// Instance commands.
#[derive(Debug, clap::Subcommand)]
pub enum InstanceCommand {
    /// Create an instance (ACTIVE at once, with a port on the network and a config drive).
    Create {
        /// Instance name.
        name: String,
        /// Availability zone.
        #[arg(long, default_value = defaults::AVAILABILITY_ZONE)]
        zone: String,
        /// Flavor name or ID.
        #[arg(long, default_value = defaults::FLAVOR)]
        flavor: String,
        /// Fixed IP on the network (default: the next free one).
        #[arg(long)]
        address: Option<String>,
        /// Network name or ID.
        #[arg(long, default_value = defaults::NETWORK)]
        network: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete an instance (its ports go, its volumes are detached).
    Delete {
        /// Instance name or ID.
        name: String,
    },
    /// Stop an instance (status SHUTOFF).
    Stop {
        /// Instance name or ID.
        name: String,
    },
    /// Start a stopped instance (status ACTIVE).
    Start {
        /// Instance name or ID.
        name: String,
    },
    /// List instances.
    List(OutputArgs),
}

/// Volume commands.
#[derive(Debug, clap::Subcommand)]
pub enum VolumeCommand {
    /// Create a volume.
    Create {
        /// Volume name.
        name: String,
        /// Size in GiB.
        #[arg(long, default_value_t = 1)]
        size: u64,
        /// Availability zone.
        #[arg(long, default_value = defaults::AVAILABILITY_ZONE)]
        zone: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a volume (it must not be attached).
    Delete {
        /// Volume name or ID.
        name: String,
    },
    /// List volumes.
    List(OutputArgs),
}

/// `--output table|json`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

/// Runs `hypercloud local-cloud ...`.
pub async fn run(args: LocalCloudArgs) -> Result<()> {
    let LocalCloudArgs {
        state_dir,
        password,
        command,
    } = args;
    let state_dir = match state_dir {
        Some(d) => d,
        None => defaults::state_dir().ok_or(Error::NoHome)?,
    };
    match command {
        Command::Serve(serve_args) => serve(state_dir, password, serve_args).await,
        Command::Instance(cmd) => {
            let client = Client::connect(&state_dir, &password).await?;
            let result = instance(&client, cmd).await;
            client.close().await?;
            result
        }
        Command::Volume(cmd) => {
            let client = Client::connect(&state_dir, &password).await?;
            let result = volume(&client, cmd).await;
            client.close().await?;
            result
        }
        Command::Status(out) => status(&state_dir, &password, out).await,
    }
}

async fn serve(state_dir: PathBuf, password: String, a: ServeArgs) -> Result<()> {
    let ServeArgs {
        listen,
        metadata_listen,
        no_metadata,
        config_drive_dir,
        public_url,
        region,
        availability_zones,
        token_ttl,
        inject_latency,
        inject_error_rate,
        inject_throttle_rate,
        tls_cert_file,
        tls_private_key_file,
        lb_vip_pool,
    } = a;
    let faults = Faults {
        latency: inject_latency.unwrap_or_default(),
        error_rate: inject_error_rate.unwrap_or_default(),
        throttle_rate: inject_throttle_rate.unwrap_or_default(),
    };
    let config = ServerConfig {
        listen,
        metadata_listen: (!no_metadata).then_some(metadata_listen),
        config_drive_dir,
        public_url,
        region,
        password,
        availability_zones,
        token_ttl,
        faults,
        tls: tls_cert_file
            .zip(tls_private_key_file)
            .map(|(cert_file, key_file)| TlsFiles {
                cert_file,
                key_file,
            }),
        lb_vip_pool,
        ..ServerConfig::new(&state_dir)
    };
    let handle = Server::bind(config.clone()).await?;
    let banner = write_client_configs(&config, &handle)?;
    println!("{banner}");
    wait_for_signal(&handle).await?;
    println!("local-cloud: shutting down");
    handle.shutdown().await
}

async fn wait_for_signal(handle: &ServerHandle) -> Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(Error::Signal)?;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => return r.map_err(Error::Signal),
                _ = term.recv() => return Ok(()),
                _ = tick.tick() => if handle.is_finished() {
                    return Err(Error::Serve("a listener stopped unexpectedly".into()));
                },
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = handle;
        tokio::signal::ctrl_c().await.map_err(Error::Signal)
    }
}

/// Writes `clouds.yaml` and `cloud.conf` into the state dir and returns the start-up banner.
fn write_client_configs(config: &ServerConfig, handle: &ServerHandle) -> Result<String> {
    let url = handle.api_url();
    let dir = &config.state_dir;
    let shown_password = if config.password == defaults::PASSWORD {
        config.password.clone()
    } else {
        "<your --password>".to_owned()
    };
    let cacert = config
        .tls
        .as_ref()
        .map(|t| format!("    cacert: {}\n", t.cert_file.display()))
        .unwrap_or_default();
    let clouds = |password: &str| {
        format!(
            "clouds:\n  local:\n    auth:\n      auth_url: {url}/identity\n      username: {user}\n      password: {password}\n      project_name: {project}\n      user_domain_name: {domain}\n      project_domain_name: {domain}\n    region_name: {region}\n    identity_api_version: 3\n{cacert}",
            user = config.user,
            project = config.project,
            domain = defaults::DOMAIN,
            region = config.region,
        )
    };
    let cloud_conf = format!(
        "[Global]\nauth-url = {url}/identity/v3\nusername = {user}\npassword = {password}\ntenant-name = {project}\ndomain-name = {domain}\nregion = {region}\n\n[Metadata]\nsearch-order = configDrive,metadataService\n",
        user = config.user,
        password = config.password,
        project = config.project,
        domain = defaults::DOMAIN,
        region = config.region,
    );
    let clouds_path = dir.join("clouds.yaml");
    let conf_path = dir.join("cloud.conf");
    for (path, body) in [
        (&clouds_path, clouds(&config.password)),
        (&conf_path, cloud_conf),
    ] {
        store::write_atomic(path, body.as_bytes()).map_err(|source| Error::WriteFile {
            path: path.clone(),
            source,
        })?;
    }
    let metadata = handle
        .metadata_addr()
        .map_or("not running (--no-metadata)".to_owned(), |a| {
            format!("http://{a}")
        });
    Ok(format!(
        "local-cloud serving (OpenStack APIs on one machine)\n\
         \x20 API:          {url}   (identity {url}/identity/v3, compute {url}/compute/v2.1,\n\
         \x20               network {url}/network/v2.0, volume {url}/volume/v3)\n\
         \x20 metadata:     {metadata}\n\
         \x20 config drive: {drive}/<instance-id>/openstack/latest/meta_data.json\n\
         \x20 state:        {state}\n\
         \n\
         Point the openstack CLI at it ({clouds_path} holds this clouds.yaml):\n\
         \x20 export OS_CLIENT_CONFIG_FILE={clouds_path} OS_CLOUD=local\n\
         \x20 openstack server list\n\
         {indented}\n\
         Point hypercloud at it:\n\
         \x20 --cloud-provider=local                (these defaults, no config file), or\n\
         \x20 --cloud-provider=openstack --cloud-config={conf}\n\
         Operate it:\n\
         \x20 hypercloud local-cloud instance create NAME [--zone Z --flavor F --address IP]\n\
         \x20 hypercloud local-cloud status",
        drive = config.config_drive_dir().display(),
        state = dir.display(),
        clouds_path = clouds_path.display(),
        conf = conf_path.display(),
        indented = clouds(&shown_password)
            .lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    ))
}

/// An authenticated API client for the operator commands (see the module docs).
struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    project_id: String,
    local: Option<ServerHandle>,
}

impl Client {
    async fn connect(state_dir: &Path, password: &str) -> Result<Self> {
        let mut http = reqwest::Client::builder();
        let (base, local) = if store::is_locked(state_dir) {
            let (url, cert) = running_server(state_dir)?;
            if let Some(cert) = cert {
                let pem = std::fs::read(&cert).map_err(|e| Error::LoadTls {
                    path: cert.clone(),
                    reason: e.to_string(),
                })?;
                for c in
                    reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| Error::LoadTls {
                        path: cert.clone(),
                        reason: e.to_string(),
                    })?
                {
                    http = http.add_root_certificate(c);
                }
            }
            (url, None)
        } else {
            let config = ServerConfig {
                metadata_listen: None,
                password: password.to_owned(),
                ..ServerConfig::ephemeral(state_dir)
            };
            let handle = Server::bind(config).await?;
            (handle.api_url().to_owned(), Some(handle))
        };
        let http = http.build().map_err(|source| Error::Request {
            method: "GET",
            url: base.clone(),
            source,
        })?;
        let url = format!("{base}/identity/v3/auth/tokens");
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": defaults::USER, "domain": {"name": defaults::DOMAIN}, "password": password}}},
            "scope": {"project": {"name": defaults::PROJECT, "domain": {"name": defaults::DOMAIN}}}}});
        let response =
            http.post(&url)
                .json(&body)
                .send()
                .await
                .map_err(|source| Error::Request {
                    method: "POST",
                    url: url.clone(),
                    source,
                })?;
        let status = response.status();
        let token = response
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response.text().await.unwrap_or_default();
        let Some(token) = token.filter(|_| status.is_success()) else {
            return Err(Error::Api {
                method: "POST",
                url,
                status: status.as_u16(),
                body: text,
            });
        };
        let body: Value = serde_json::from_str(&text).unwrap_or_default();
        let project_id = body["token"]["project"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok(Client {
            http,
            base,
            token,
            project_id,
            local,
        })
    }

    async fn close(self) -> Result<()> {
        match self.local {
            Some(handle) => handle.shutdown().await,
            None => Ok(()),
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value> {
        self.send(method, path, body, None).await
    }

    /// A compute GET at the newest microversion, which shows zones and flavor names.
    async fn get_compute(&self, path: &str) -> Result<Value> {
        self.send(Method::GET, path, None, Some("compute 2.79"))
            .await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        microversion: Option<&str>,
    ) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let name: &'static str = match method.as_str() {
            "GET" => "GET",
            "POST" => "POST",
            "PUT" => "PUT",
            "DELETE" => "DELETE",
            _ => "REQUEST",
        };
        let mut req = self
            .http
            .request(method, &url)
            .header("x-auth-token", &self.token);
        if let Some(v) = microversion {
            req = req.header("openstack-api-version", v);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let response = req.send().await.map_err(|source| Error::Request {
            method: name,
            url: url.clone(),
            source,
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|source| Error::Request {
            method: name,
            url: url.clone(),
            source,
        })?;
        if !status.is_success() {
            return Err(Error::Api {
                method: name,
                url,
                status: status.as_u16(),
                body: text,
            });
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Result<Value> {
        self.call(Method::GET, path, None).await
    }

    /// A server by ID or exact name.
    async fn find_server(&self, name: &str) -> Result<Value> {
        let all = self.get("/compute/v2.1/servers/detail").await?;
        let servers = all["servers"].as_array().cloned().unwrap_or_default();
        let found: Vec<Value> = servers
            .iter()
            .filter(|s| s["id"] == name)
            .cloned()
            .collect();
        let found = if found.is_empty() {
            servers.into_iter().filter(|s| s["name"] == name).collect()
        } else {
            found
        };
        match found.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(Error::NotFound {
                what: "instance",
                name: name.into(),
            }),
            _ => Err(Error::NotFound {
                what: "single instance (several match; use the ID)",
                name: name.into(),
            }),
        }
    }

    async fn find_volume(&self, name: &str) -> Result<Value> {
        let all = self
            .get(&format!("/volume/v3/{}/volumes/detail", self.project_id))
            .await?;
        let vols = all["volumes"].as_array().cloned().unwrap_or_default();
        vols.into_iter()
            .find(|v| v["id"] == name || v["name"] == name)
            .ok_or_else(|| Error::NotFound {
                what: "volume",
                name: name.into(),
            })
    }
}

/// The URL of the server holding `state_dir`, and its TLS certificate if it serves HTTPS.
fn running_server(state_dir: &Path) -> Result<(String, Option<PathBuf>)> {
    let path = state_dir.join(SERVER_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| Error::ReadSnapshot {
        path: path.clone(),
        source,
    })?;
    let info: Value = serde_json::from_str(&text).map_err(|source| Error::DecodeSnapshot {
        path: path.clone(),
        source,
    })?;
    let cert = info["tls_cert_file"].as_str().map(PathBuf::from);
    info["api_url"]
        .as_str()
        .map(|u| (u.to_owned(), cert))
        .ok_or_else(|| Error::NotFound {
            what: "api_url in",
            name: path.display().to_string(),
        })
}

fn print(output: Output, value: &Value, table: impl FnOnce() -> Vec<Vec<String>>) {
    match output {
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        ),
        Output::Table => print_table(&table()),
    }
}

fn print_table(rows: &[Vec<String>]) {
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

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn server_row(srv: &Value) -> Vec<String> {
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

const SERVER_HEADER: [&str; 6] = ["ID", "NAME", "STATUS", "ZONE", "FLAVOR", "ADDRESSES"];

async fn server_detail(client: &Client, id: &str) -> Result<Value> {
    let v = client
        .get_compute(&format!("/compute/v2.1/servers/{id}"))
        .await?;
    Ok(v["server"].clone())
}

async fn instance(client: &Client, cmd: InstanceCommand) -> Result<()> {
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

async fn power(client: &Client, name: &str, action: &str, done: &str) -> Result<()> {
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

fn volume_row(v: &Value) -> Vec<String> {
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

const VOLUME_HEADER: [&str; 6] = ["ID", "NAME", "STATUS", "SIZE", "ZONE", "ATTACHED"];

async fn volume(client: &Client, cmd: VolumeCommand) -> Result<()> {
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

async fn status(state_dir: &Path, password: &str, out: OutputArgs) -> Result<()> {
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
    let summary = json!({
        "running": running,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Top {
        #[command(flatten)]
        args: LocalCloudArgs,
    }

    #[test]
    fn clap_definition_is_valid() {
        Top::command().debug_assert();
    }

    #[test]
    fn parses_serve_flags_and_global_state_dir() {
        let top = Top::try_parse_from([
            "local-cloud",
            "serve",
            "--state-dir",
            "/tmp/x",
            "--listen",
            "127.0.0.1:9000",
            "--inject-error-rate",
            "compute=0.5",
            "--availability-zones",
            "nova,az2",
            "--token-ttl",
            "2h",
        ])
        .unwrap();
        assert_eq!(top.args.state_dir, Some(PathBuf::from("/tmp/x")));
        let Command::Serve(serve) = top.args.command else {
            panic!("not serve")
        };
        assert_eq!(serve.listen, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(
            serve.availability_zones,
            Some(vec!["nova".into(), "az2".into()])
        );
        assert_eq!(serve.token_ttl, Duration::from_secs(7200));
        assert_eq!(
            serve
                .inject_error_rate
                .unwrap()
                .0
                .for_service(crate::Service::Compute),
            Some(0.5)
        );
        assert!(Top::try_parse_from(["local-cloud", "serve", "--inject-error-rate", "2"]).is_err());
    }
}
