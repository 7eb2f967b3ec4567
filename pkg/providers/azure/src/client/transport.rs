//! The HTTP transport under azure_core's pipelines: the workspace's `reqwest` 0.12 client
//! (rustls, the extra CA of [`super::ArmOptions::ca_file`], no redirects followed), every
//! answer's body capped ([`Limited`]) before the SDK or the client reads it. azure_core 1.x
//! would bring its own reqwest 0.13 and TLS set-up (its default features); hypercloud builds it
//! without them and hands it this transport, as azure_core allows (`ClientOptions::transport`).
//! [`StreamBody`] turns an SDK body back into an [`http_body::Body`], so the client reads it
//! through [`hypercloud_cloudprovider::http_body`] with the limit of each kind of call.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use azure_core::error::ErrorKind;
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::{AsyncRawResponse, Body, HttpClient, Method, Request, StatusCode};
use bytes::Bytes;
use futures::Stream;
use hypercloud_cloudprovider::http_body::{BodyError, Limited};

/// One API's transport: a client and the most any answer may be.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    http: reqwest::Client,
    limit: u64,
    api: &'static str,
}

impl Transport {
    /// Answers of `api` (named in errors) capped at `limit` bytes.
    pub fn new(http: reqwest::Client, limit: u64, api: &'static str) -> Self {
        Transport { http, limit, api }
    }

    /// As azure_core's transport.
    pub fn into_sdk(self) -> azure_core::http::Transport {
        azure_core::http::Transport::new(Arc::new(self))
    }
}

fn method(m: Method) -> azure_core::Result<reqwest::Method> {
    Ok(match m {
        Method::Get => reqwest::Method::GET,
        Method::Put => reqwest::Method::PUT,
        Method::Post => reqwest::Method::POST,
        Method::Patch => reqwest::Method::PATCH,
        Method::Delete => reqwest::Method::DELETE,
        Method::Head => reqwest::Method::HEAD,
        other => {
            return Err(azure_core::Error::with_message(
                ErrorKind::Other,
                format!("HTTP method {other} is not supported by hypercloud's transport"),
            ))
        }
    })
}

#[async_trait::async_trait]
impl HttpClient for Transport {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let url = request.url();
        let call = format!("{} {}", request.method(), url.path());
        let mut req = self.http.request(method(request.method())?, url.as_str());
        for (name, value) in request.headers().iter() {
            req = req.header(name.as_str(), value.as_str());
        }
        match request.body() {
            Body::Bytes(bytes) if bytes.is_empty() => {}
            Body::Bytes(bytes) => req = req.body(bytes.clone()),
            #[allow(unreachable_patterns)]
            _ => {
                return Err(azure_core::Error::with_message(
                    ErrorKind::Other,
                    "streamed request bodies are not supported by hypercloud's transport",
                ))
            }
        }
        let resp = req.send().await.map_err(|e| {
            let kind = if e.is_connect() || e.is_timeout() {
                ErrorKind::Connection
            } else {
                ErrorKind::Io
            };
            azure_core::Error::with_error(kind, e, format!("{call} to {}", self.api))
        })?;
        let status = StatusCode::from(resp.status().as_u16());
        let headers: Headers = resp
            .headers()
            .iter()
            .filter_map(|(k, v)| {
                let v = v.to_str().ok()?;
                Some((
                    HeaderName::from(k.as_str().to_owned()),
                    HeaderValue::from(v.to_owned()),
                ))
            })
            .collect::<std::collections::HashMap<_, _>>()
            .into();
        let body = Limited::new(reqwest::Body::from(resp), self.limit, self.api, call);
        Ok(AsyncRawResponse::new(
            status,
            headers,
            Box::pin(frames(body)),
        ))
    }
}

/// The data frames of a capped body, as the SDK's byte stream.
fn frames<B>(body: B) -> impl Stream<Item = azure_core::Result<Bytes>> + Send
where
    B: http_body::Body<Data = Bytes, Error = BodyError> + Send + Unpin,
{
    futures::stream::unfold(body, |mut body| async move {
        loop {
            match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await? {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        return Some((Ok(data), body));
                    }
                }
                Err(e) => {
                    let e = azure_core::Error::with_error(ErrorKind::Io, e, "reading the answer");
                    return Some((Err(e), body));
                }
            }
        }
    })
}

/// An SDK byte stream as an [`http_body::Body`].
pub(crate) struct StreamBody<S>(pub S);

impl<S> http_body::Body for StreamBody<S>
where
    S: Stream<Item = azure_core::Result<Bytes>> + Unpin,
{
    type Data = Bytes;
    type Error = azure_core::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, azure_core::Error>>> {
        Pin::new(&mut self.0)
            .poll_next(cx)
            .map(|item| item.map(|r| r.map(http_body::Frame::data)))
    }
}
