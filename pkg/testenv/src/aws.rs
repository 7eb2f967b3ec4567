//! The AWS side of the aws provider's tests: a moto server (PyPI `moto[server]`, the AWS API
//! simulator), Amazon's `amazon-ec2-metadata-mock` (IMDSv1/v2) configured as one instance
//! created in moto, and the official `aws` CLI to check what the provider made. All three are
//! installed by `hack/aws-tools.sh` (pinned in `hack/python-tools.sh` and `hack/versions.env`),
//! which is run here when they are missing; every server listens on a free 127.0.0.1 port.
//!
//! Like the other process helpers these panic with a message saying what failed.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::process::{free_port, Proc};

/// The region the tests use (moto serves any).
pub const REGION: &str = "us-east-1";
/// The zone the tests use.
pub const ZONE: &str = "us-east-1a";
/// Credentials moto accepts (it does not check them).
pub const ACCESS_KEY: &str = "AKIDHYPERCLOUDTEST";
/// Secret of [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "hypercloud-test-secret";

/// Paths of the installed tools.
#[derive(Clone, Debug)]
pub struct Tools {
    /// `moto_server`.
    pub moto_server: PathBuf,
    /// `aws`.
    pub aws_cli: PathBuf,
    /// `ec2-metadata-mock`.
    pub metadata_mock: PathBuf,
}

/// The tools, installed by `hack/aws-tools.sh install` on first use in this process.
pub fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Tools> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let script = crate::repo_root().join("hack/aws-tools.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("install")
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{} install failed:\n{}{}",
            script.display(),
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        let var = |name: &str| -> PathBuf {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("hack/aws-tools.sh printed no {name}:\n{stdout}"))
        };
        Tools {
            moto_server: var("HYPERCLOUD_MOTO_SERVER"),
            aws_cli: var("HYPERCLOUD_AWS_CLI"),
            metadata_mock: var("HYPERCLOUD_EC2_METADATA_MOCK"),
        }
    })
}

/// Waits until `url` answers an HTTP GET (any status), or panics naming `what`.
fn wait_http(url: &str, what: &str, proc: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let addr = url.trim_start_matches("http://");
    let host_port = addr.split('/').next().unwrap_or(addr);
    loop {
        if std::net::TcpStream::connect(host_port).is_ok() {
            return;
        }
        if !proc.running() {
            panic!("{what} exited before listening:\n{}", proc.log());
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {host_port} within 60s:\n{}",
            proc.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server of ours on a loopback port, with its working directory; killed when dropped.
struct Served {
    proc: Proc,
    url: String,
    _dir: tempfile::TempDir,
}

impl Served {
    /// Spawns `cmd` as `what` on `port`, logging to `dir`/`log`, and waits until it listens.
    fn start(what: &str, cmd: Command, port: u16, dir: tempfile::TempDir, log: &str) -> Self {
        let mut proc = Proc::spawn(what, cmd, dir.path().join(log));
        let url = format!("http://127.0.0.1:{port}");
        wait_http(&url, what, &mut proc);
        Served {
            proc,
            url,
            _dir: dir,
        }
    }
}

/// A moto server on a free loopback port; killed when dropped.
pub struct Moto(Served);

impl Moto {
    /// Starts `moto_server -H 127.0.0.1 -p PORT` and waits until it listens.
    pub fn start() -> Moto {
        let t = tools();
        let dir = tempfile::tempdir().expect("temp dir for moto");
        let port = free_port();
        let mut cmd = Command::new(&t.moto_server);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .current_dir(dir.path())
            // moto's own IMDS-like credentials endpoint is not used; keep it from looking
            // anywhere else.
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
        Moto(Served::start("moto_server", cmd, port, dir, "moto.log"))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.0.url
    }

    /// moto's log so far.
    pub fn log(&self) -> String {
        self.0.proc.log()
    }

    /// The `aws` CLI against this moto (region [`REGION`], JSON output).
    pub fn cli_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&tools().aws_cli);
        cmd.args([
            "--endpoint-url",
            &self.0.url,
            "--region",
            REGION,
            "--output",
            "json",
        ])
        .args(args)
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env_remove("AWS_PROFILE")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true");
        cmd
    }

    /// Runs the `aws` CLI, asserting success; its JSON answer (`null` when it printed nothing).
    pub fn cli(&self, args: &[&str]) -> Value {
        let out = self
            .cli_command(args)
            .output()
            .unwrap_or_else(|e| panic!("running aws {args:?}: {e}"));
        assert!(
            out.status.success(),
            "aws {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.stdout.iter().all(u8::is_ascii_whitespace) {
            return Value::Null;
        }
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "aws {args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Creates a VPC with one subnet in [`ZONE`] and the nodes' security group
    /// (`<cluster>-nodes`), all tagged for `cluster_id`; (vpc ID, subnet ID). The VPC is `10.N.0.0/16` with N picked at random, so that instances (and
    /// so Node names, `ip-10-N-1-x.ec2.internal`) of concurrent tests on one apiserver differ.
    pub fn create_network(&self, cluster_id: &str) -> (String, String) {
        let n = random_octet();
        let vpc = self.cli(&[
            "ec2",
            "create-vpc",
            "--cidr-block",
            &format!("10.{n}.0.0/16"),
        ]);
        let vpc_id = vpc["Vpc"]["VpcId"].as_str().expect("VpcId").to_owned();
        let subnet = self.cli(&[
            "ec2",
            "create-subnet",
            "--vpc-id",
            &vpc_id,
            "--cidr-block",
            &format!("10.{n}.1.0/24"),
            "--availability-zone",
            ZONE,
        ]);
        let subnet_id = subnet["Subnet"]["SubnetId"]
            .as_str()
            .expect("SubnetId")
            .to_owned();
        self.cli(&[
            "ec2",
            "create-tags",
            "--resources",
            &vpc_id,
            &subnet_id,
            "--tags",
            &format!("Key=kubernetes.io/cluster/{cluster_id},Value=owned"),
        ]);
        let sg = self.cli(&[
            "ec2",
            "create-security-group",
            "--group-name",
            &format!("{cluster_id}-nodes"),
            "--description",
            "the cluster's nodes",
            "--vpc-id",
            &vpc_id,
        ]);
        let sg = sg["GroupId"].as_str().expect("GroupId");
        self.cli(&[
            "ec2",
            "create-tags",
            "--resources",
            sg,
            "--tags",
            &format!("Key=kubernetes.io/cluster/{cluster_id},Value=owned"),
        ]);
        (vpc_id, subnet_id)
    }

    /// Runs `count` instances in `subnet`, tagged for `cluster_id` and in its nodes' security
    /// group (when given); their JSON.
    pub fn run_instances(
        &self,
        subnet: &str,
        count: usize,
        cluster_id: Option<&str>,
        instance_type: &str,
    ) -> Vec<Value> {
        let count = count.to_string();
        let mut args = vec![
            "ec2",
            "run-instances",
            "--image-id",
            "ami-12c6146b",
            "--count",
            &count,
            "--instance-type",
            instance_type,
            "--subnet-id",
            subnet,
        ];
        let tags;
        let group;
        if let Some(id) = cluster_id {
            let groups = self.cli(&[
                "ec2",
                "describe-security-groups",
                "--filters",
                &format!("Name=group-name,Values={id}-nodes"),
            ]);
            group = groups["SecurityGroups"][0]["GroupId"]
                .as_str()
                .expect("the nodes' security group (create_network)")
                .to_owned();
            args.extend(["--security-group-ids", &group]);
            tags = format!(
                "ResourceType=instance,Tags=[{{Key=kubernetes.io/cluster/{id},Value=owned}}]"
            );
            args.extend(["--tag-specifications", &tags]);
        }
        let reply = self.cli(&args);
        reply["Instances"].as_array().expect("Instances").clone()
    }
}

fn random_octet() -> u8 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() % 250) as u8 + 1
}

/// The test cluster's ID (tags `kubernetes.io/cluster/<ID>`).
pub const CLUSTER: &str = "demo";

/// A cloud for one test: moto with a cluster network and `n` tagged `m5.large` instances,
/// and a metadata mock playing the first of them with an instance role (so the SDK's
/// credential chain finds credentials without the test touching its environment).
pub struct Cloud {
    /// The moto server.
    pub moto: Moto,
    /// The metadata mock.
    pub mock: MetadataMock,
    /// The VPC.
    pub vpc: String,
    /// The subnet, in [`ZONE`].
    pub subnet: String,
    /// The instances as moto's `run-instances` described them.
    pub instances: Vec<Value>,
}

impl Cloud {
    /// Starts moto, makes the network and instances, starts the mock as instance `mock_as`.
    pub fn start(n: usize, mock_as: usize) -> Cloud {
        let moto = Moto::start();
        let (vpc, subnet) = moto.create_network(CLUSTER);
        let instances = moto.run_instances(&subnet, n, Some(CLUSTER), "m5.large");
        let mut me = MockInstance::from_moto(&instances[mock_as]);
        me.role = Some(role("AKIDFROMIMDSROLE"));
        let mock = MetadataMock::start(&me, false);
        Cloud {
            moto,
            mock,
            vpc,
            subnet,
            instances,
        }
    }

    /// The provider's config for this cloud (see [`cloud_conf`]).
    pub fn conf(&self, extra: &str) -> String {
        cloud_conf(self.moto.url(), self.mock.url(), extra)
    }

    /// Field `key` of instance `i`.
    pub fn field(&self, i: usize, key: &str) -> &str {
        self.instances[i][key].as_str().unwrap_or_default()
    }
}

/// The upstream INI config of the aws provider pointing EC2 and ELB at `endpoint` and IMDS at
/// `metadata`; `extra` (whole sections, or keys of `[Hypercloud]`) goes last, so its keys win.
/// moto answers at once: the EBS waits' real-AWS pauses are cut to a hundredth.
pub fn cloud_conf(endpoint: &str, metadata: &str, extra: &str) -> String {
    format!(
        "[Global]\nZone = {ZONE}\nKubernetesClusterID = {CLUSTER}\n\
         [ServiceOverride \"ec2\"]\nService = ec2\nRegion = {REGION}\nURL = {endpoint}\n\
         [ServiceOverride \"elb\"]\nService = elasticloadbalancing\nRegion = {REGION}\nURL = {endpoint}\n\
         [Hypercloud]\nmetadata-endpoint = {metadata}\ninstance-cache-ttl = 5s\nvolume-wait-scale = 0.01\n{extra}\n"
    )
}

/// An instance role for the mock: (role, access key, secret, token).
pub fn role(key: &str) -> (String, String, String, String) {
    (
        "hypercloud-node".into(),
        key.into(),
        "secret-from-imds".into(),
        "token-from-imds".into(),
    )
}

/// What the metadata mock says about "this" instance.
#[derive(Clone, Debug, Default)]
pub struct MockInstance {
    /// `instance-id`.
    pub instance_id: String,
    /// `placement/availability-zone`.
    pub availability_zone: String,
    /// `local-ipv4`.
    pub private_ip: String,
    /// `local-hostname` and `hostname`.
    pub private_hostname: String,
    /// `mac`.
    pub mac: String,
    /// `instance-type`.
    pub instance_type: String,
    /// An instance role and its credentials (access key, secret, token), served under
    /// `iam/security-credentials/<role>`.
    pub role: Option<(String, String, String, String)>,
}

impl MockInstance {
    /// The mock's view of an instance as moto's `run-instances`/`describe-instances` gave it.
    pub fn from_moto(instance: &Value) -> MockInstance {
        let s = |k: &str| instance[k].as_str().unwrap_or_default().to_owned();
        MockInstance {
            instance_id: s("InstanceId"),
            availability_zone: instance["Placement"]["AvailabilityZone"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            private_ip: s("PrivateIpAddress"),
            private_hostname: s("PrivateDnsName"),
            mac: instance["NetworkInterfaces"][0]["MacAddress"]
                .as_str()
                .unwrap_or("0e:00:00:00:00:01")
                .to_owned(),
            instance_type: s("InstanceType"),
            role: None,
        }
    }
}

/// amazon-ec2-metadata-mock on a free loopback port, answering as one instance; killed when
/// dropped.
pub struct MetadataMock(Served);

impl MetadataMock {
    /// Starts the mock with `instance`'s values; `imdsv2_only` makes it refuse requests
    /// without a session token.
    pub fn start(instance: &MockInstance, imdsv2_only: bool) -> MetadataMock {
        let t = tools();
        let dir = tempfile::tempdir().expect("temp dir for the metadata mock");
        let port = free_port();
        let mac = &instance.mac;
        let mac_path =
            |leaf: &str| format!("/latest/meta-data/network/interfaces/macs/{mac}/{leaf}");
        let mut values = json!({
            "instance-id": instance.instance_id,
            "placement-availability-zone": instance.availability_zone,
            "placement-region": instance.availability_zone.trim_end_matches(|c: char| c.is_ascii_alphabetic()),
            "local-ipv4": instance.private_ip,
            "local-hostname": instance.private_hostname,
            "hostname": instance.private_hostname,
            "mac": mac,
            "mac-mac": mac,
            "mac-local-ipv4s": instance.private_ip,
            "mac-local-hostname": instance.private_hostname,
            "instance-type": instance.instance_type,
        });
        let mut paths = json!({
            "mac-mac": mac_path("mac"),
            "mac-local-ipv4s": mac_path("local-ipv4s"),
            "mac-local-hostname": mac_path("local-hostname"),
            "mac-device-number": mac_path("device-number"),
            "mac-subnet-id": mac_path("subnet-id"),
            "mac-vpc-id": mac_path("vpc-id"),
        });
        if let Some((role, key, secret, token)) = &instance.role {
            values["iam-security-credentials-role"] = json!(role);
            values["iam-security-credentials"] = json!({
                "code": "Success",
                "lastupdated": "2026-01-01T00:00:00Z",
                "type": "AWS-HMAC",
                "accesskeyid": key,
                "secretaccesskey": secret,
                "token": token,
                "expiration": "2099-01-01T00:00:00Z",
            });
            paths["iam-security-credentials"] =
                json!(format!("/latest/meta-data/iam/security-credentials/{role}"));
        }
        let config = json!({
            "imdsv2": imdsv2_only,
            "metadata": { "paths": paths, "values": values },
            "server": { "hostname": "127.0.0.1", "port": port.to_string() },
        });
        let config_path = dir.path().join("aemm-config.json");
        std::fs::write(
            &config_path,
            serde_json::to_vec_pretty(&config).expect("json"),
        )
        .expect("write the metadata mock's config");
        let mut cmd = Command::new(&t.metadata_mock);
        cmd.arg("--config-file")
            .arg(&config_path)
            .args(["--hostname", "127.0.0.1", "--port", &port.to_string()])
            .current_dir(dir.path())
            .env("HOME", dir.path());
        if imdsv2_only {
            cmd.arg("--imdsv2");
        }
        MetadataMock(Served::start(
            "ec2-metadata-mock",
            cmd,
            port,
            dir,
            "mock.log",
        ))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.0.url
    }

    /// The mock's log so far.
    pub fn log(&self) -> String {
        self.0.proc.log()
    }
}

/// What a [`FaultProxy`] saw and is told to do.
#[derive(Debug, Default)]
struct ProxyState {
    throttle_next: u32,
    access_keys: Vec<String>,
    actions: Vec<String>,
    /// Each request's form body (the query protocols' parameters), URL-encoded.
    bodies: Vec<String>,
    /// Each request's headers, names lower-cased.
    headers: Vec<Vec<(String, String)>>,
    throttled: u32,
}

/// An HTTP proxy on a free loopback port in front of moto, for what moto cannot do itself:
/// answer the next N requests with EC2's throttling error (`RequestLimitExceeded`, HTTP 503,
/// request ID `hypercloud-throttle-<n>`), and record each request's action and the access key
/// it was signed with. Stops when dropped.
pub struct FaultProxy {
    url: String,
    state: std::sync::Arc<std::sync::Mutex<ProxyState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (moto's URL). Needs a tokio runtime.
    pub async fn start(upstream: &str) -> FaultProxy {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fault proxy");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = std::sync::Arc::new(std::sync::Mutex::new(ProxyState::default()));
        let upstream = upstream.trim_end_matches('/').to_owned();
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let state = shared.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let (r, mut w) = sock.into_split();
                    let mut r = BufReader::new(r);
                    loop {
                        let mut head = Vec::new();
                        loop {
                            let mut line = String::new();
                            match r.read_line(&mut line).await {
                                Ok(0) | Err(_) => return,
                                Ok(_) => {}
                            }
                            if line == "\r\n" || line == "\n" {
                                break;
                            }
                            head.push(line.trim_end().to_owned());
                        }
                        let Some(request_line) = head.first().cloned() else {
                            return;
                        };
                        let mut parts = request_line.split_whitespace();
                        let method = parts.next().unwrap_or("GET").to_owned();
                        let path = parts.next().unwrap_or("/").to_owned();
                        let headers: Vec<(String, String)> = head[1..]
                            .iter()
                            .filter_map(|h| h.split_once(':'))
                            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                            .collect();
                        let len = headers
                            .iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                            .and_then(|(_, v)| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        let mut body = vec![0; len];
                        if r.read_exact(&mut body).await.is_err() {
                            return;
                        }
                        let text = String::from_utf8_lossy(&body).into_owned();
                        let action = text
                            .split('&')
                            .find_map(|kv| kv.strip_prefix("Action="))
                            .unwrap_or_default()
                            .to_owned();
                        let key = headers
                            .iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                            .and_then(|(_, v)| v.split("Credential=").nth(1))
                            .and_then(|c| c.split('/').next())
                            .unwrap_or_default()
                            .to_owned();
                        let throttle = {
                            let mut s = state.lock().expect("proxy state");
                            s.actions.push(action);
                            s.bodies.push(text.clone());
                            s.headers.push(
                                headers
                                    .iter()
                                    .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                                    .collect(),
                            );
                            s.access_keys.push(key);
                            if s.throttle_next > 0 {
                                s.throttle_next -= 1;
                                s.throttled += 1;
                                Some(s.throttled)
                            } else {
                                None
                            }
                        };
                        let (status, reply) = match throttle {
                            Some(n) => (
                                "503 Service Unavailable".to_owned(),
                                format!(
                                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>hypercloud-throttle-{n}</RequestID></Response>"
                                ),
                            ),
                            None => match forward(&upstream, &method, &path, &headers, body).await {
                                Ok(x) => x,
                                Err(e) => ("502 Bad Gateway".to_owned(), e),
                            },
                        };
                        let out = format!(
                            "HTTP/1.1 {status}\r\ncontent-type: text/xml\r\ncontent-length: {}\r\n\r\n{reply}",
                            reply.len()
                        );
                        if w.write_all(out.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FaultProxy { url, state, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answers the next `n` requests with `RequestLimitExceeded`.
    pub fn throttle_next(&self, n: u32) {
        self.state.lock().expect("proxy state").throttle_next = n;
    }

    /// The actions (`DescribeInstances`, ...) of every request so far.
    pub fn actions(&self) -> Vec<String> {
        self.state.lock().expect("proxy state").actions.clone()
    }

    /// The form body of every request so far (URL-encoded `Key=Value&...`), in the order of
    /// [`FaultProxy::actions`]: what a client sent, for what moto does not keep.
    pub fn bodies(&self) -> Vec<String> {
        self.state.lock().expect("proxy state").bodies.clone()
    }

    /// The headers of every request so far (names lower-cased), in the order of
    /// [`FaultProxy::actions`].
    pub fn headers(&self) -> Vec<Vec<(String, String)>> {
        self.state.lock().expect("proxy state").headers.clone()
    }

    /// The access key ID each request so far was signed with.
    pub fn access_keys(&self) -> Vec<String> {
        self.state.lock().expect("proxy state").access_keys.clone()
    }
}

/// Sends one request to moto over a fresh connection; (status line rest, body).
async fn forward(
    upstream: &str,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Result<(String, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = upstream.trim_start_matches("http://");
    let mut sock = tokio::net::TcpStream::connect(host)
        .await
        .map_err(|e| format!("connect to moto: {e}"))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        if k.eq_ignore_ascii_case("connection") {
            continue;
        }
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("connection: close\r\n\r\n");
    sock.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    sock.write_all(&body).await.map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    sock.read_to_end(&mut raw)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "moto's answer has no header end".to_owned())?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_once(' '))
        .map(|(_, s)| s.to_owned())
        .ok_or_else(|| "moto's answer has no status line".to_owned())?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Ok((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
