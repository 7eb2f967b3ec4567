//! The legacy provider's cloud config: one `[mesos-cloud]` section (gcfg).
//!
//! ```ini
//! [mesos-cloud]
//! mesos-master        = leader.mesos:5050
//! http-client-timeout = 500ms
//! state-cache-ttl     = 1h
//! ```
//!
//! Defaults as upstream: `localhost:5050`, `10s`, `5s`. As gcfg did for the legacy provider,
//! an unknown section or key is an error naming it. `[mesos-client]` is read as
//! `[mesos-cloud]` with a warning (a name some guides give it; the legacy provider read only
//! `[mesos-cloud]`). The master is a `host:port`: the legacy provider also took ZooKeeper
//! (`zk://`) and file URLs through mesos-go's detector, which are refused here by name.

use std::time::Duration;

use hypercloud_cloudprovider::{duration, gcfg, CloudConfig, Error, Result};

use crate::PROVIDER_NAME;

/// Upstream's `DefaultMesosMaster`.
pub const DEFAULT_MASTER: &str = "localhost:5050";
/// Upstream's `DefaultHttpClientTimeout`.
pub const DEFAULT_HTTP_CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Upstream's `DefaultStateCacheTTL`.
pub const DEFAULT_STATE_CACHE_TTL: Duration = Duration::from_secs(5);
/// The longest `http-client-timeout`.
pub const MAX_HTTP_CLIENT_TIMEOUT: Duration = Duration::from_secs(3600);
/// The longest `state-cache-ttl`.
pub const MAX_STATE_CACHE_TTL: Duration = Duration::from_secs(24 * 3600);

/// What the provider is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The master asked first, `host:port` (`mesos-master`); the provider then follows the
    /// leader the master names.
    pub master: String,
    /// Timeout of one request to the master (`http-client-timeout`).
    pub http_client_timeout: Duration,
    /// How long one `/state` answer is used (`state-cache-ttl`; 0: every call asks).
    pub state_cache_ttl: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            master: DEFAULT_MASTER.into(),
            http_client_timeout: DEFAULT_HTTP_CLIENT_TIMEOUT,
            state_cache_ttl: DEFAULT_STATE_CACHE_TTL,
        }
    }
}

impl Config {
    /// Reads `--cloud-config`; without one, the defaults (as upstream, which accepted a nil
    /// reader).
    pub fn from_cloud_config(config: Option<&CloudConfig>) -> Result<Config> {
        match config {
            None => Ok(Config::default()),
            Some(c) => {
                Config::parse(c.text(PROVIDER_NAME)?).map_err(|message| Error::InvalidCloudConfig {
                    provider: PROVIDER_NAME.into(),
                    origin: c.origin.clone(),
                    message,
                })
            }
        }
    }

    /// Parses the gcfg text; the error names the line, section or key.
    pub fn parse(text: &str) -> std::result::Result<Config, String> {
        let file = gcfg::parse(text)?;
        for s in &file.sections {
            match s.name.to_ascii_lowercase().as_str() {
                "mesos-cloud" if s.subsection.is_none() => {}
                "mesos-client" if s.subsection.is_none() => tracing::warn!(
                    line = s.line,
                    "[{}] read as [mesos-cloud], the section the legacy mesos provider read",
                    s.name
                ),
                _ => {
                    return Err(format!(
                        "line {}: unknown section [{}]{}; the mesos provider reads [mesos-cloud]",
                        s.line,
                        s.name,
                        s.subsection
                            .as_ref()
                            .map(|x| format!(" {x:?}"))
                            .unwrap_or_default()
                    ))
                }
            }
        }
        let mut config = Config::default();
        for e in &file.entries {
            let at = |m: String| format!("line {}: {}: {m}", e.line, e.key);
            let value = e.value.as_deref().unwrap_or_default();
            match e.key_lower().as_str() {
                "mesos-master" => config.master = parse_master(value).map_err(at)?,
                "http-client-timeout" => {
                    config.http_client_timeout =
                        duration::parse_in(value, Duration::from_millis(1), MAX_HTTP_CLIENT_TIMEOUT)
                            .map_err(at)?
                }
                "state-cache-ttl" => {
                    config.state_cache_ttl =
                        duration::parse_in(value, Duration::ZERO, MAX_STATE_CACHE_TTL)
                            .map_err(at)?
                }
                _ => {
                    return Err(at(
                        "unknown key; [mesos-cloud] has mesos-master, http-client-timeout and state-cache-ttl"
                            .into(),
                    ))
                }
            }
        }
        Ok(config)
    }
}

/// `host:port` (a host name, an IPv4 address or a bracketed IPv6 address, and a port).
fn parse_master(v: &str) -> std::result::Result<String, String> {
    let v = v.trim();
    if let Some((scheme, _)) = v.split_once("://") {
        return Err(match scheme {
            "zk" => "ZooKeeper leader detection (zk://) is not implemented by hypercloud's mesos provider: give a master's host:port; the provider follows the leader that master names".into(),
            _ => format!("{scheme}:// is not supported: give the master as host:port (the legacy provider asked it over http)"),
        });
    }
    let (host, port) = v
        .rsplit_once(':')
        .ok_or_else(|| format!("{v:?} is not host:port"))?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("{v:?}: the port must be 1 to 65535"))?;
    let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        inner.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host.len() <= 253
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    };
    if !host_ok {
        return Err(format!("{v:?}: {host:?} is not a host name or address"));
    }
    Ok(format!("{host}:{port}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_example_and_defaults() {
        let c = Config::parse(
            "[mesos-cloud]\n mesos-master = leader.mesos:5050\n\thttp-client-timeout = 500ms\n\tstate-cache-ttl = 1h\n",
        )
        .unwrap();
        assert_eq!(c.master, "leader.mesos:5050");
        assert_eq!(c.http_client_timeout, Duration::from_millis(500));
        assert_eq!(c.state_cache_ttl, Duration::from_secs(3600));
        assert_eq!(Config::parse("").unwrap(), Config::default());
        assert_eq!(
            Config::from_cloud_config(None).unwrap().master,
            "localhost:5050"
        );
        let alias = Config::parse("[mesos-client]\nmesos-master = [::1]:5050\n").unwrap();
        assert_eq!(alias.master, "[::1]:5050");
    }

    #[test]
    fn bad_input_is_named() {
        for (text, want) in [
            ("[Global]\nx = 1\n", "unknown section [Global]"),
            (
                "[mesos-cloud]\nmesos-masters = a:1\n",
                "mesos-masters: unknown key",
            ),
            (
                "[mesos-cloud]\nmesos-master = zk://z:2181/mesos\n",
                "ZooKeeper",
            ),
            ("[mesos-cloud]\nmesos-master = leader\n", "is not host:port"),
            (
                "[mesos-cloud]\nmesos-master = a:0\n",
                "port must be 1 to 65535",
            ),
            (
                "[mesos-cloud]\nmesos-master = a b:5050\n",
                "is not a host name",
            ),
            ("[mesos-cloud]\nhttp-client-timeout = 0s\n", "out of range"),
            (
                "[mesos-cloud]\nstate-cache-ttl = 48h\n",
                "out of range (0s to 24h)",
            ),
            (
                "[mesos-cloud]\nstate-cache-ttl = soon\n",
                "is not a duration",
            ),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
