//! The master's `/state`, as the legacy provider read it: `GET http://<master>/state`, then the
//! older `/state.json` when that is not answered with 200; the answer is kept for
//! `state-cache-ttl` and shared by concurrent callers (one request at a time).
//!
//! The legacy provider learnt the leader from mesos-go's detector. Here the master that was
//! asked names the leader (`leader`, `master@host:port`), and later requests go to that leader,
//! as the detector's master-changed callback made them go.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hypercloud_cloudprovider::http_body::{self, LIST_LIMIT};
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use hypercloud_cloudprovider::{Chain, Error, Result};
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::config::Config;
use crate::PROVIDER_NAME;

/// The cluster name when the master has none (upstream `defaultClusterName`).
pub const DEFAULT_CLUSTER_NAME: &str = "mesos";

/// One agent, as the provider uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agent {
    /// The agent ID (`<master id>-S<n>`).
    pub id: String,
    /// The agent's hostname: the Node's name, resolved to its address.
    pub hostname: String,
    /// Whether the agent is connected (`active`).
    pub active: bool,
}

/// What one `/state` answer says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MesosState {
    /// `cluster`, or [`DEFAULT_CLUSTER_NAME`].
    pub cluster_name: String,
    /// The leading master's `host:port`, when the answer names one.
    pub leader: Option<String>,
    /// Agents by hostname (agents without one are skipped, as upstream).
    pub agents: BTreeMap<String, Agent>,
}

#[derive(Deserialize)]
struct RawState {
    cluster: Option<String>,
    leader: Option<String>,
    #[serde(default)]
    slaves: Vec<RawAgent>,
}

#[derive(Deserialize)]
struct RawAgent {
    id: String,
    #[serde(default)]
    hostname: String,
    active: Option<bool>,
}

/// Parses a `/state` document; the error says what is missing.
pub fn parse_state(body: &[u8]) -> std::result::Result<MesosState, String> {
    let raw: RawState = serde_json::from_slice(body).map_err(|e| {
        format!(
            "not a Mesos state document: {e} (answer begins {})",
            http_body::excerpt(body)
        )
    })?;
    let leader = match raw.leader.as_deref() {
        None | Some("") => None,
        Some(pid) => Some(leader_address(pid).ok_or_else(|| {
            format!(
                "leader {:?} is not a master@host:port PID",
                http_body::excerpt_str(pid)
            )
        })?),
    };
    let mut agents = BTreeMap::new();
    for a in raw.slaves {
        if a.hostname.is_empty() {
            continue;
        }
        agents.insert(
            a.hostname.clone(),
            Agent {
                id: a.id,
                hostname: a.hostname,
                active: a.active.unwrap_or(true),
            },
        );
    }
    Ok(MesosState {
        cluster_name: raw
            .cluster
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| DEFAULT_CLUSTER_NAME.into()),
        leader,
        agents,
    })
}

/// `master@10.0.0.1:5050` → `10.0.0.1:5050`.
fn leader_address(pid: &str) -> Option<String> {
    let (_, addr) = pid.split_once('@')?;
    let (host, port) = addr.rsplit_once(':')?;
    let ok = !host.is_empty()
        && port.parse::<u16>().is_ok_and(|p| p != 0)
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '[' | ']'));
    ok.then(|| addr.to_owned())
}

struct Cache {
    /// Where the next request goes: the configured master, then the leader it named.
    master: String,
    state: Option<(Instant, MesosState)>,
}

/// The master's client.
pub struct Client {
    http: reqwest::Client,
    ttl: Duration,
    cache: Mutex<Cache>,
}

impl Client {
    /// A client of `config.master`.
    pub fn new(config: &Config) -> Result<Client> {
        let http = HttpClientConfig::new(config.http_client_timeout, config.http_client_timeout)
            .user_agent("hypercloud-mesos")
            .build()
            .map_err(|e| Error::cloud(PROVIDER_NAME, "build the HTTP client", e.to_string()))?;
        Ok(Client {
            http,
            ttl: config.state_cache_ttl,
            cache: Mutex::new(Cache {
                master: config.master.clone(),
                state: None,
            }),
        })
    }

    /// The master asked next (the leader once one was named).
    pub async fn master(&self) -> String {
        self.cache.lock().await.master.clone()
    }

    /// The state, from the cache while it is fresh.
    pub async fn state(&self) -> Result<MesosState> {
        let mut cache = self.cache.lock().await;
        if let Some((at, state)) = &cache.state {
            if at.elapsed() < self.ttl {
                tracing::trace!("using the cached Mesos state");
                return Ok(state.clone());
            }
        }
        let state = self.fetch(&cache.master).await?;
        if let Some(leader) = &state.leader {
            if *leader != cache.master {
                tracing::info!(from = %cache.master, to = %leader, "Mesos leading master changed");
                cache.master = leader.clone();
            }
        }
        cache.state = Some((Instant::now(), state.clone()));
        Ok(state)
    }

    async fn fetch(&self, master: &str) -> Result<MesosState> {
        let mut answers = Vec::new();
        for path in ["/state", "/state.json"] {
            let url = format!("http://{master}{path}");
            let call = format!("GET {path}");
            let response =
                self.http.get(&url).send().await.map_err(|e| {
                    Error::cloud(PROVIDER_NAME, &call, format!("{url}: {}", Chain(&e)))
                })?;
            let status = response.status();
            if status != reqwest::StatusCode::OK {
                answers.push(format!("{path}: HTTP {}", status.as_u16()));
                continue;
            }
            let body = http_body::read_limited(
                reqwest::Body::from(response),
                LIST_LIMIT,
                "Mesos master",
                &call,
            )
            .await
            .map_err(|e| Error::cloud(PROVIDER_NAME, &call, Chain(&e).to_string()))?;
            return parse_state(&body)
                .map_err(|m| Error::cloud(PROVIDER_NAME, &call, format!("{url}: {m}")));
        }
        Err(Error::cloud(
            PROVIDER_NAME,
            "sync with the Mesos master",
            format!("{master} answered {}", answers.join(", ")),
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn state_documents_as_the_legacy_provider_read_them() {
        let s = parse_state(
            br#"{"cluster":"c1","leader":"master@10.0.0.1:5050","slaves":[
                {"id":"a-S0","hostname":"10.0.0.5","active":true},
                {"id":"a-S1","hostname":"","active":true},
                {"id":"a-S2","hostname":"node-2","active":false}]}"#,
        )
        .unwrap();
        assert_eq!(s.cluster_name, "c1");
        assert_eq!(s.leader.as_deref(), Some("10.0.0.1:5050"));
        assert_eq!(s.agents.len(), 2, "the agent without a hostname is skipped");
        assert!(!s.agents["node-2"].active);
        let bare = parse_state(br#"{"slaves":[]}"#).unwrap();
        assert_eq!(bare.cluster_name, "mesos");
        assert_eq!(bare.leader, None);
    }

    /// A one-connection-at-a-time HTTP server on loopback answering `answer(path)` as
    /// `(status, body)`; its address and the paths it was asked.
    async fn master(
        answer: impl Fn(&str) -> (u16, String) + Send + Sync + 'static,
    ) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = request.split_whitespace().nth(1).unwrap_or("").to_owned();
                seen.lock().unwrap().push(path.clone());
                let (status, body) = answer(&path);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            }
        });
        (addr, asked)
    }

    #[tokio::test]
    async fn the_legacy_path_is_asked_after_the_new_one_and_the_named_leader_after_that() {
        let (leader, leader_asked) =
            master(|_| (200, r#"{"cluster":"led","slaves":[]}"#.into())).await;
        let named = format!(r#"{{"cluster":"first","leader":"master@{leader}","slaves":[]}}"#);
        let (first, first_asked) = master(move |path| match path {
            "/state.json" => (200, named.clone()),
            _ => (404, String::new()),
        })
        .await;
        let config = Config {
            master: first.clone(),
            state_cache_ttl: Duration::ZERO,
            ..Config::default()
        };
        let client = Client::new(&config).unwrap();
        assert_eq!(client.state().await.unwrap().cluster_name, "first");
        assert_eq!(*first_asked.lock().unwrap(), ["/state", "/state.json"]);
        assert_eq!(
            client.master().await,
            leader,
            "the leader named is asked next"
        );
        assert_eq!(client.state().await.unwrap().cluster_name, "led");
        assert_eq!(*leader_asked.lock().unwrap(), ["/state"]);
        assert_eq!(
            first_asked.lock().unwrap().len(),
            2,
            "the first master is not asked again"
        );
    }

    #[tokio::test]
    async fn a_master_answering_neither_path_is_an_error_with_both_answers() {
        let (addr, _) = master(|_| (503, String::new())).await;
        let config = Config {
            master: addr.clone(),
            ..Config::default()
        };
        let e = Client::new(&config).unwrap().state().await.unwrap_err();
        let text = Chain(&e).to_string();
        assert!(
            text.contains(&addr) && text.contains("/state: HTTP 503, /state.json: HTTP 503"),
            "{text}"
        );
    }

    #[test]
    fn malformed_documents_are_errors_that_say_why() {
        assert!(parse_state(b"<html>")
            .unwrap_err()
            .contains("not a Mesos state document"));
        assert!(parse_state(br#"{"slaves":[{"hostname":"x"}]}"#)
            .unwrap_err()
            .contains("missing field `id`"));
        assert!(parse_state(br#"{"leader":"nobody"}"#)
            .unwrap_err()
            .contains("is not a master@host:port PID"));
    }
}
