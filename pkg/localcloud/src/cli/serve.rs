//! `local-cloud serve`: run the cloud in the foreground, write `clouds.yaml` and `cloud.conf`
//! for clients, stop on SIGINT/SIGTERM.

use super::*;

pub(super) async fn serve(state_dir: PathBuf, password: String, a: ServeArgs) -> Result<()> {
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
        inject_operation_failure_rate,
        tls_cert_file,
        tls_private_key_file,
        tls_self_signed,
        tls_client_ca,
        lb_vip_pool,
        enforce_member_security_groups,
        gce_require_tokens,
        mesos_cluster,
        photon_require_tokens,
        volume_backing,
        follow_aws_elb,
        follow_aws_region,
        follow_aws_address_map,
        follow_aws_interval,
    } = a;
    let follow_aws = follow_aws_elb.map(|endpoint| crate::AwsFollow {
        endpoint,
        region: follow_aws_region,
        address_map: follow_aws_address_map,
        interval: follow_aws_interval,
    });
    let faults = Faults {
        latency: inject_latency.unwrap_or_default(),
        error_rate: inject_error_rate.unwrap_or_default(),
        throttle_rate: inject_throttle_rate.unwrap_or_default(),
        operation_failure_rate: inject_operation_failure_rate.unwrap_or_default(),
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
        tls_self_signed,
        tls_client_ca,
        lb_vip_pool,
        enforce_member_security_groups,
        gce_require_tokens,
        mesos_cluster,
        photon_require_tokens,
        volume_backing,
        follow_aws,
        ..ServerConfig::new(&state_dir)
    };
    // Before binding: a SIGTERM that comes while the server starts (a supervisor or test
    // stopping it at once) still ends it cleanly instead of killing it.
    let mut signals = Signals::install()?;
    let handle = Server::bind(config.clone()).await?;
    let banner = write_client_configs(&config, &handle)?;
    println!("{banner}");
    signals.wait(&handle).await?;
    println!("local-cloud: shutting down");
    handle.shutdown().await
}

/// SIGINT and SIGTERM handlers.
pub(super) struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn install() -> Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                term: signal(SignalKind::terminate()).map_err(Error::Signal)?,
                int: signal(SignalKind::interrupt()).map_err(Error::Signal)?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// Until SIGINT or SIGTERM, or an error when a listener stops by itself.
    pub(super) async fn wait(&mut self, handle: &ServerHandle) -> Result<()> {
        #[cfg(unix)]
        {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = self.int.recv() => return Ok(()),
                    _ = self.term.recv() => return Ok(()),
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
}

/// Writes `clouds.yaml` and `cloud.conf` into the state dir and returns the start-up banner.
pub(super) fn write_client_configs(config: &ServerConfig, handle: &ServerHandle) -> Result<String> {
    let url = handle.api_url();
    let dir = &config.state_dir;
    let shown_password = if config.password == defaults::PASSWORD {
        config.password.clone()
    } else {
        "<your --password>".to_owned()
    };
    let cacert = handle
        .tls_ca_file()
        .map(|f| format!("    cacert: {}\n", f.display()))
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
    let trust = handle
        .tls_ca_file()
        .map(|f| {
            format!(
                "\x20 TLS trust:    {f}   (export REQUESTS_CA_BUNDLE={f})\n",
                f = f.display()
            )
        })
        .unwrap_or_default();
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
         {trust}\
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
