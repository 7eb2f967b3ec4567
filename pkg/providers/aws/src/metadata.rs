//! The EC2 instance metadata service (IMDS) as the node side reads it: a session token first
//! (IMDSv2: `PUT /latest/api/token`), and when the service does not hand one out, plain
//! IMDSv1 `GET`s, as the Go SDK the legacy provider used did (`ec2metadata`).
//! Upstream equivalent: legacy `aws.go` `EC2Metadata` and cloud-provider-aws
//! `pkg/providers/v1/aws_metadata.go`.

use std::time::Duration;

use hypercloud_cloudprovider::http_body::{self, METADATA_LIMIT};
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use hypercloud_cloudprovider::Chain;
use reqwest::StatusCode;

use crate::error::{Error, Result};

/// Token lifetime asked for (6 hours, the SDKs' default).
const TOKEN_TTL_SECONDS: &str = "21600";

/// What the node side needs about its own instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// `instance-id`.
    pub instance_id: String,
    /// `placement/availability-zone`.
    pub availability_zone: String,
    /// `local-hostname` (the private DNS name).
    pub local_hostname: String,
    /// `local-ipv4`.
    pub local_ipv4: String,
    /// `mac` (of the primary interface).
    pub mac: String,
    /// `instance-type`.
    pub instance_type: String,
    /// Whether the answers came with an IMDSv2 token.
    pub v2: bool,
}

/// An IMDS client on one endpoint.
#[derive(Clone, Debug)]
pub struct MetadataClient {
    endpoint: String,
    http: reqwest::Client,
}

impl MetadataClient {
    /// A client for `endpoint` (e.g. `http://169.254.169.254`), each request bounded by
    /// `timeout`.
    pub fn new(endpoint: &str, timeout: Duration) -> Result<Self> {
        // IMDS is link-local: the SDKs' own IMDS client connects within 1s. IMDS never
        // redirects; a redirect is refused (see `send`), not followed.
        let http = HttpClientConfig::new(timeout, Duration::from_secs(1))
            .metadata_server(None)
            .build()
            .map_err(|e| Error::ReadMetadata {
                endpoint: endpoint.into(),
                path: String::new(),
                message: format!("building the HTTP client: {}", Chain(&e)),
            })?;
        Ok(MetadataClient {
            endpoint: endpoint.trim_end_matches('/').into(),
            http,
        })
    }

    /// The endpoint in use.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn err(&self, path: &str, message: impl Into<String>) -> Error {
        Error::ReadMetadata {
            endpoint: self.endpoint.clone(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// Sends `req` for `path`, refusing a redirect.
    async fn send(&self, req: reqwest::RequestBuilder, path: &str) -> Result<reqwest::Response> {
        let reply = req
            .send()
            .await
            .map_err(|e| self.err(path, e.to_string()))?;
        let location = reply.headers().get(reqwest::header::LOCATION);
        http_body::refuse_redirect(
            reply.status().as_u16(),
            location.map(|l| l.as_bytes()),
            &format!("IMDS {}", self.endpoint),
            path,
        )
        .map_err(|e| self.err(path, e.to_string()))?;
        Ok(reply)
    }

    /// The body of `reply`, at most [`METADATA_LIMIT`] bytes, as trimmed text.
    async fn text(&self, reply: reqwest::Response, path: &str) -> Result<String> {
        let bytes = http_body::read_limited(
            reqwest::Body::from(reply),
            METADATA_LIMIT,
            &format!("IMDS {}", self.endpoint),
            path,
        )
        .await
        .map_err(|e| self.err(path, Chain(&e).to_string()))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            self.err(
                path,
                format!("not UTF-8: {}", http_body::excerpt(e.as_bytes())),
            )
        })?;
        Ok(text.trim().to_owned())
    }

    /// A session token, or `None` when the service answers the token request with an HTTP
    /// error (IMDSv1 only). A connection failure is an error: v1 would fail the same way.
    pub async fn token(&self) -> Result<Option<String>> {
        let path = "/latest/api/token";
        let req = self
            .http
            .put(format!("{}{path}", self.endpoint))
            .header("X-aws-ec2-metadata-token-ttl-seconds", TOKEN_TTL_SECONDS);
        let reply = self.send(req, path).await?;
        if !reply.status().is_success() {
            tracing::debug!(status = %reply.status(), "no IMDSv2 token; falling back to IMDSv1");
            return Ok(None);
        }
        let token = self.text(reply, path).await?;
        Ok(Some(token).filter(|t| !t.is_empty()))
    }

    /// `GET /latest/meta-data/<path>`, with the token when there is one; `Ok(None)` on 404
    /// (an absent item, e.g. `public-ipv4` of a private instance).
    pub async fn get(&self, token: Option<&str>, item: &str) -> Result<Option<String>> {
        let path = format!("/latest/meta-data/{item}");
        let mut req = self.http.get(format!("{}{path}", self.endpoint));
        if let Some(t) = token {
            req = req.header("X-aws-ec2-metadata-token", t);
        }
        let reply = self.send(req, &path).await?;
        match reply.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Ok(Some(self.text(reply, &path).await?)),
            s => Err(self.err(&path, format!("HTTP {s}"))),
        }
    }

    async fn required(&self, token: Option<&str>, item: &str) -> Result<String> {
        self.get(token, item)
            .await?
            .filter(|v| !v.is_empty())
            .ok_or_else(|| self.err(&format!("/latest/meta-data/{item}"), "not found"))
    }

    /// The instance's identity: ID and zone are required, the rest may be empty.
    pub async fn identity(&self) -> Result<Identity> {
        let token = self.token().await?;
        let t = token.as_deref();
        let opt = |item: &'static str| async move {
            Ok::<_, Error>(self.get(t, item).await?.unwrap_or_default())
        };
        Ok(Identity {
            instance_id: self.required(t, "instance-id").await?,
            availability_zone: self.required(t, "placement/availability-zone").await?,
            local_hostname: opt("local-hostname").await?,
            local_ipv4: opt("local-ipv4").await?,
            mac: opt("mac").await?,
            instance_type: opt("instance-type").await?,
            v2: token.is_some(),
        })
    }
}
