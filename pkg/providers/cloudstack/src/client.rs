//! CloudStack's query API as the legacy provider's client (go-cloudstack) and `cs` speak it:
//! `GET <api-url>?command=...&response=json&apiKey=...&signature=...`, every request signed
//! with the user's secret key (HMAC-SHA1 over the sorted, URL-encoded, lower-cased query),
//! `signatureVersion=3` with an `expires` ten minutes ahead. An answer is the one top-level
//! `<command>response` object; an error answer's HTTP status is its `errorcode` and its
//! `errortext` says why. Asynchronous commands answer a `jobid`, polled with
//! `queryAsyncJobResult` until `jobstatus` is 1 (its `jobresult`) or 2 (its error), within a
//! bounded time.

use std::time::Duration;

use hypercloud_cloudprovider::http_body::{self, LIST_LIMIT};
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use hypercloud_cloudprovider::wait::{poll_until, Backoff, Poll, WaitError};
use hypercloud_cloudprovider::{Chain, Error, Message, Result};
use serde_json::Value;

use crate::config::Config;
use crate::PROVIDER_NAME;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first pause between `queryAsyncJobResult` polls.
const JOB_POLL_FIRST: Duration = Duration::from_millis(200);
const JOB_POLL_MAX: Duration = Duration::from_secs(5);
/// How far ahead a signature expires.
const SIGNATURE_LIFETIME: Duration = Duration::from_secs(600);

/// The signed client of one CloudStack API endpoint.
pub struct Client {
    http: reqwest::Client,
    api_url: String,
    api_key: String,
    secret_key: String,
    job_timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("api_url", &self.api_url)
            .field("job_timeout", &self.job_timeout)
            .finish_non_exhaustive()
    }
}

/// `quote(s, safe="*")` of Python, as `cs` encodes a value before signing (Java's
/// `URLEncoder.encode(s).replace("+", "%20")` on the server).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'~' | b'*') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The signature of `params` (without `signature`): HMAC-SHA1 of the `key=value` pairs sorted by
/// key, values encoded, joined by `&`, lower-cased; base64.
pub fn sign(params: &[(String, String)], secret: &str) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let text = sorted
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
        .to_lowercase();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
    let tag = ring::hmac::sign(&key, text.as_bytes());
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
}

/// CloudStack's `expires`: `2026-11-28T12:10:00+0000`.
fn expires_at(after: Duration) -> String {
    let now = jiff::Timestamp::now();
    let at = now
        .checked_add(jiff::SignedDuration::try_from(after).unwrap_or_default())
        .unwrap_or(now);
    at.strftime("%Y-%m-%dT%H:%M:%S+0000").to_string()
}

impl Client {
    pub fn new(config: &Config) -> Result<Client> {
        let http = HttpClientConfig::new(REQUEST_TIMEOUT, CONNECT_TIMEOUT)
            .user_agent("hypercloud-cloudstack")
            .insecure(config.ssl_no_verify)
            .ca_file("[Hypercloud] ca-file", config.ca_file.as_deref())
            .build()
            .map_err(|e| {
                Error::cloud(
                    PROVIDER_NAME,
                    "build the HTTP client",
                    Chain(&e).to_string(),
                )
            })?;
        Ok(Client {
            http,
            api_url: config.api_url.clone(),
            api_key: config.api_key.clone(),
            secret_key: config.secret_key.clone(),
            job_timeout: config.job_timeout,
        })
    }

    /// The answer of a synchronous command: its `<command>response` object.
    pub async fn call(&self, command: &str, args: &[(&str, String)]) -> Result<Value> {
        let mut params: Vec<(String, String)> = vec![
            ("command".into(), command.into()),
            ("response".into(), "json".into()),
            ("apiKey".into(), self.api_key.clone()),
            ("signatureVersion".into(), "3".into()),
            ("expires".into(), expires_at(SIGNATURE_LIFETIME)),
        ];
        params.extend(
            args.iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| ((*k).to_owned(), v.clone())),
        );
        let signature = sign(&params, &self.secret_key);
        params.push(("signature".into(), signature));
        let response = self
            .http
            .get(&self.api_url)
            .query(&params)
            .send()
            .await
            .map_err(|e| {
                Error::cloud(
                    PROVIDER_NAME,
                    command,
                    format!("{}: {}", self.api_url, Chain(&e)),
                )
            })?;
        let status = response.status();
        let body = http_body::read_limited(
            reqwest::Body::from(response),
            LIST_LIMIT,
            "CloudStack",
            command,
        )
        .await
        .map_err(|e| Error::cloud(PROVIDER_NAME, command, Chain(&e).to_string()))?;
        let value: Value = serde_json::from_slice(&body).map_err(|e| {
            Error::cloud(
                PROVIDER_NAME,
                command,
                format!(
                    "not a CloudStack JSON answer (HTTP {status}): {e} (answer begins {})",
                    http_body::excerpt(&body)
                ),
            )
        })?;
        // The answer is the value of its single top-level key, as `cs` unwraps it.
        let inner = match value.as_object() {
            Some(m) if m.len() == 1 => m.values().next().cloned().unwrap_or(Value::Null),
            _ => {
                return Err(Error::cloud(
                    PROVIDER_NAME,
                    command,
                    format!(
                        "unexpected answer: one top-level key was expected (answer begins {})",
                        http_body::excerpt(&body)
                    ),
                ))
            }
        };
        if !status.is_success() {
            let code = inner["errorcode"]
                .as_u64()
                .map_or_else(|| status.as_u16().to_string(), |c| c.to_string());
            let text = inner["errortext"].as_str().unwrap_or("(no errortext)");
            let hint = if status == reqwest::StatusCode::UNAUTHORIZED {
                " (check [Global] api-key and secret-key)"
            } else {
                ""
            };
            return Err(Error::Cloud {
                provider: PROVIDER_NAME.into(),
                operation: command.into(),
                status: Some(status.as_u16()),
                request_id: None,
                source: Box::new(Message(format!("errorcode {code}: {text}{hint}"))),
            });
        }
        Ok(inner)
    }

    /// An asynchronous command: its `jobid` polled until the job ends; the job's `jobresult`.
    pub async fn call_async(&self, command: &str, args: &[(&str, String)]) -> Result<Value> {
        let started = self.call(command, args).await?;
        let Some(job) = started["jobid"].as_str().map(str::to_owned) else {
            // Some commands answer at once when nothing was to be done.
            return Ok(started);
        };
        let done = poll_until(
            Backoff::new(JOB_POLL_FIRST, JOB_POLL_MAX, self.job_timeout),
            || {
                let job = job.clone();
                async move {
                    let j = self.call("queryAsyncJobResult", &[("jobid", job)]).await?;
                    match j["jobstatus"].as_u64() {
                        Some(0) => Ok(Poll::Pending("pending (jobstatus 0)".into())),
                        Some(_) => Ok::<_, Error>(Poll::Ready(j)),
                        None => Err(Error::cloud(
                            PROVIDER_NAME,
                            "queryAsyncJobResult",
                            format!("job answer without jobstatus: {j}"),
                        )),
                    }
                }
            },
        )
        .await;
        let j = match done {
            Ok(j) => j,
            Err(WaitError::Failed(e)) => return Err(e),
            Err(WaitError::TimedOut(t)) => {
                return Err(Error::cloud(
                    PROVIDER_NAME,
                    command,
                    format!(
                        "job {job} did not finish within {}s ([Hypercloud] job-timeout): {t}",
                        self.job_timeout.as_secs()
                    ),
                ))
            }
        };
        if j["jobstatus"].as_u64() != Some(1) || j["jobresultcode"].as_u64().unwrap_or(0) != 0 {
            let r = &j["jobresult"];
            return Err(Error::cloud(
                PROVIDER_NAME,
                command,
                format!(
                    "job {job} failed: errorcode {}: {}",
                    r["errorcode"],
                    r["errortext"].as_str().unwrap_or("(no errortext)")
                ),
            ));
        }
        Ok(j["jobresult"].clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn values_are_encoded_as_cs_encodes_them() {
        assert_eq!(encode("a b+c/d,e*f~g"), "a%20b%2Bc%2Fd%2Ce*f~g");
        assert_eq!(encode("10.0.0.0/8"), "10.0.0.0%2F8");
        assert_eq!(encode("é"), "%C3%A9");
    }

    #[test]
    fn signatures_as_cs_computes_them() {
        // The expected values are what PyPI cs 5.2.0's `CloudStack._sign` computes for the same
        // parameters and secret (the referee the local cloud's dialect is checked by).
        let secret =
            "Lxx1DM40AjcXU_jXbj4VpSGSXEJeFAhDIb_B7aNpHLGw_Ru4gpZnQkEOu_bstlRuPNL5nsNcBDcwqH_mywzYtQ";
        let key = "miVr6X7u6bN_sdahOBpjNejPgEsT35eXq-jB8CG20YI3yaxXcgpyuaIRmFI_EJTVwZ0nUkkJbPmY3y2bciKwFQ";
        let params = |extra: &[(&str, &str)]| -> Vec<(String, String)> {
            [
                ("command", "listUsers"),
                ("response", "json"),
                ("apikey", key),
            ]
            .iter()
            .chain(extra)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
        };
        assert_eq!(sign(&params(&[]), secret), "/QuIdmSDCNVRG6XNyhnDPTP1k/o=");
        assert_eq!(
            sign(
                &params(&[("cidrlist", "10.0.0.0/8,1.2.3.4/32"), ("name", "a b*~")]),
                secret
            ),
            "Obnm9T8S/kSIyVYVaZR3uuF8MNU="
        );
    }

    /// A server that answers every request with `status` and `body`.
    async fn hostile(status: u16, body: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        format!("http://{addr}/client/api")
    }

    fn client(url: &str) -> Client {
        let config = Config::parse(&format!(
            "[Global]\napi-url = {url}\napi-key = k\nsecret-key = s\n[Hypercloud]\njob-timeout = 1s\n"
        ))
        .unwrap();
        Client::new(&config).unwrap()
    }

    #[tokio::test]
    async fn malformed_answers_are_errors_naming_the_command() {
        for (status, body, says) in [
            (200, "<html>gateway</html>", "not a CloudStack JSON answer"),
            (
                200,
                r#"{"a": {}, "b": {}}"#,
                "one top-level key was expected",
            ),
            (200, "[1, 2]", "one top-level key was expected"),
            (
                503,
                r#"{"listzonesresponse": {"errorcode": 530, "errortext": "boom"}}"#,
                "errorcode 530: boom",
            ),
            (
                401,
                r#"{"listzonesresponse": {"errorcode": 401, "errortext": "unable to verify"}}"#,
                "check [Global] api-key and secret-key",
            ),
        ] {
            let c = client(&hostile(status, body).await);
            let e = c.call("listZones", &[]).await.unwrap_err();
            let text = Chain(&e).to_string();
            assert!(
                text.contains("listZones") && text.contains(says),
                "{body}: {text}"
            );
        }
        // A job answer without jobstatus, and a job that stays pending past the bound.
        let c = client(&hostile(200, r#"{"x": {"jobid": "j1"}}"#).await);
        let e = Chain(&c.call_async("createFirewallRule", &[]).await.unwrap_err()).to_string();
        assert!(e.contains("job answer without jobstatus"), "{e}");
        let c = client(&hostile(200, r#"{"x": {"jobid": "j1", "jobstatus": 0}}"#).await);
        let e = Chain(&c.call_async("createFirewallRule", &[]).await.unwrap_err()).to_string();
        assert!(e.contains("job j1 did not finish within 1s"), "{e}");
        let c = client(
            &hostile(200, r#"{"x": {"jobid": "j1", "jobstatus": 2, "jobresultcode": 530, "jobresult": {"errorcode": 431, "errortext": "port taken"}}}"#)
                .await,
        );
        let e = Chain(
            &c.call_async("createLoadBalancerRule", &[])
                .await
                .unwrap_err(),
        )
        .to_string();
        assert!(
            e.contains("job j1 failed: errorcode 431: port taken"),
            "{e}"
        );
    }

    #[test]
    fn expires_is_cloudstack_s_form() {
        let e = expires_at(Duration::from_secs(600));
        assert_eq!(e.len(), "2026-11-28T12:10:00+0000".len(), "{e}");
        assert!(e.ends_with("+0000"));
    }
}
