//! Reading answers from the network with a bound, and quoting them in errors (issue #29,
//! class 3). Every client of a cloud API or a metadata server reads a response body through
//! [`read_limited`] (a byte limit per kind of call: [`METADATA_LIMIT`], [`OBJECT_LIMIT`],
//! [`LIST_LIMIT`]; the answer to a failed call through [`read_prefix`], at most
//! [`ERROR_PREFIX_LIMIT`]), so a server that sends gigabytes, or never stops, costs at most
//! the limit; and every error that quotes what a server said quotes an [`excerpt`]: at most
//! [`EXCERPT_CHARS`] characters, control characters escaped, marked when cut. Metadata
//! servers never redirect, so their clients turn any redirect into [`BodyError::Redirected`]
//! ([`refuse_redirect`]). Upstream equivalent: Go's `io.LimitReader` around `resp.Body`, as
//! `cloud.google.com/go/compute/metadata` and the AWS SDK's `ec2imds` use it.
//!
//! The body is any [`http_body::Body`]: `reqwest::Body::from(response)`, hyper's `Incoming`,
//! the AWS SDK's `SdkBody`.

use std::error::Error as StdError;
use std::pin::pin;

use bytes::Buf as _;
use http_body::Body;

/// Answers of a metadata server (IMDS, GCE metadata, the OpenStack metadata service): 1 MiB,
/// as a config drive's file (`input::MAX_INPUT_FILE_BYTES`).
pub const METADATA_LIMIT: u64 = 1 << 20;
/// Answers naming one object (a get, a mutation, its operation, a token): 16 MiB.
pub const OBJECT_LIMIT: u64 = 16 << 20;
/// One page of a list (a describe, a property collector's page): 64 MiB.
pub const LIST_LIMIT: u64 = 64 << 20;
/// How much of the answer to a failed call is read (to find its error code and message);
/// the rest is dropped unread: 64 KiB.
pub const ERROR_PREFIX_LIMIT: u64 = 64 << 10;
/// The most characters [`excerpt`] keeps.
pub const EXCERPT_CHARS: usize = 200;

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The server sent (or announced) more than the call's limit.
    #[error("the answer of {api} to {call} is larger than the limit of {limit} bytes; the rest was not read")]
    TooLarge {
        /// The API or server (`EC2 http://...`, `GCE metadata`).
        api: String,
        /// The call (`instances.list`, `GET /latest/meta-data/instance-id`).
        call: String,
        /// The limit in bytes.
        limit: u64,
    },

    /// The connection failed while the body was read.
    #[error("reading the answer of {api} to {call}")]
    Read {
        /// The API or server.
        api: String,
        /// The call.
        call: String,
        /// The transport's error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },

    /// A server that never redirects answered with a redirect.
    #[error("{api} answered {call} with a redirect (HTTP {status}) to {location}; a metadata server never redirects, so it is refused")]
    Redirected {
        /// The server.
        api: String,
        /// The call.
        call: String,
        /// The status code.
        status: u16,
        /// An excerpt of the `Location` header.
        location: String,
    },
}

/// Reads `body` whole, but at most `limit` bytes: a `Content-Length` above the limit is
/// refused before anything is read, and a longer stream is refused at the first byte past
/// it ([`BodyError::TooLarge`] naming `api`, `call` and the limit).
pub async fn read_limited<B>(
    body: B,
    limit: u64,
    api: &str,
    call: &str,
) -> Result<Vec<u8>, BodyError>
where
    B: Body,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let too_large = || BodyError::TooLarge {
        api: api.into(),
        call: call.into(),
        limit,
    };
    if body.size_hint().lower() > limit {
        return Err(too_large());
    }
    // Room for the announced length at once, but never more than 1 MiB on a server's word
    // (the limit may be far larger than anything meant to be allocated up front).
    let announced = body.size_hint().lower().min(METADATA_LIMIT);
    let mut bytes = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
    let cut = read_up_to(body, limit, &mut bytes)
        .await
        .map_err(|source| BodyError::Read {
            api: api.into(),
            call: call.into(),
            source,
        })?;
    if cut {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The first [`ERROR_PREFIX_LIMIT`] bytes of `body` and whether there was more (left unread),
/// for the answer to a failed call: enough to parse a cloud's error document, never more. A
/// transport failure midway ends the prefix where it broke.
pub async fn read_prefix<B>(body: B) -> (Vec<u8>, bool)
where
    B: Body,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let mut bytes = Vec::new();
    let cut = read_up_to(body, ERROR_PREFIX_LIMIT, &mut bytes)
        .await
        .unwrap_or(false);
    (bytes, cut)
}

/// A body that passes `inner` through, but fails with [`BodyError::TooLarge`] as soon as it
/// announces or sends more than its limit: the cap for clients that read bodies themselves
/// (the AWS SDK), given to them in place of the network's body.
#[derive(Debug)]
pub struct Limited<B> {
    inner: B,
    limit: u64,
    seen: u64,
    api: String,
    call: String,
    failed: bool,
}

impl<B> Limited<B> {
    /// `inner`, capped at `limit` bytes; errors name `api` and `call`.
    pub fn new(inner: B, limit: u64, api: impl Into<String>, call: impl Into<String>) -> Self {
        Limited {
            inner,
            limit,
            seen: 0,
            api: api.into(),
            call: call.into(),
            failed: false,
        }
    }

    fn too_large(&mut self) -> BodyError {
        self.failed = true;
        BodyError::TooLarge {
            api: self.api.clone(),
            call: self.call.clone(),
            limit: self.limit,
        }
    }
}

impl<B> Body for Limited<B>
where
    B: Body + Unpin,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type Data = B::Data;
    type Error = BodyError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<B::Data>, BodyError>>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        if this.seen == 0 && this.inner.size_hint().lower() > this.limit {
            return Poll::Ready(Some(Err(this.too_large())));
        }
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.seen = this.seen.saturating_add(data.remaining() as u64);
                    if this.seen > this.limit {
                        return Poll::Ready(Some(Err(this.too_large())));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(BodyError::Read {
                api: this.api.clone(),
                call: this.call.clone(),
                source: e.into(),
            }))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Appends up to `limit` bytes of `body` to `bytes`; whether it had more. On a transport
/// failure, `bytes` holds what came before it.
async fn read_up_to<B>(
    body: B,
    limit: u64,
    bytes: &mut Vec<u8>,
) -> Result<bool, Box<dyn StdError + Send + Sync>>
where
    B: Body,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut body = pin!(body);
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let Ok(mut data) = frame.map_err(Into::into)?.into_data() else {
            continue; // trailers
        };
        while data.has_remaining() {
            let chunk = data.chunk();
            let room = limit - bytes.len();
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                return Ok(true);
            }
            bytes.extend_from_slice(chunk);
            let n = chunk.len();
            data.advance(n);
        }
    }
    Ok(false)
}

/// What a server said, fit to quote in an error or a log line: lossy UTF-8, surrounding
/// white space trimmed, control characters escaped, at most [`EXCERPT_CHARS`] characters
/// (`\n`, `\u{1b}`), and `… (N bytes in all)` when cut.
pub fn excerpt(bytes: &[u8]) -> String {
    excerpt_with(bytes, EXCERPT_CHARS)
}

/// [`excerpt`] keeping at most `max_chars` characters: for a chain of error messages that
/// may hold what a server said, longer than one quote but still bounded.
pub fn excerpt_with(bytes: &[u8], max_chars: usize) -> String {
    // Four bytes per character at most: no need to decode more than that.
    let head = &bytes[..bytes
        .len()
        .min(max_chars.saturating_mul(4).saturating_add(4))];
    let text = String::from_utf8_lossy(head);
    let text = text.trim();
    let mut out = String::new();
    let mut kept = 0;
    let mut cut =
        head.len() < bytes.len() && !bytes[head.len()..].iter().all(u8::is_ascii_whitespace);
    for c in text.chars() {
        let width = if c.is_control() {
            c.escape_debug().count()
        } else {
            1
        };
        if kept + width > max_chars {
            cut = true;
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
        kept += width;
    }
    if cut {
        out.push_str(&format!("… ({} bytes in all)", bytes.len()));
    }
    out
}

/// [`excerpt`] of a string.
pub fn excerpt_str(text: &str) -> String {
    excerpt(text.as_bytes())
}

/// For a server that never redirects: `Err(Redirected)` when `status` is a redirect
/// (3xx), quoting an excerpt of its `Location`.
pub fn refuse_redirect(
    status: u16,
    location: Option<&[u8]>,
    api: &str,
    call: &str,
) -> Result<(), BodyError> {
    if !(300..400).contains(&status) {
        return Ok(());
    }
    Err(BodyError::Redirected {
        api: api.into(),
        call: call.into(),
        status,
        location: location.map_or_else(|| "nowhere".into(), excerpt),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use bytes::Bytes;
    use http_body::{Frame, SizeHint};

    use super::*;

    /// A body of `chunk`s, endless when `total` is `None`, announcing `announce` as its length.
    struct Endless {
        chunk: Bytes,
        left: Option<u64>,
        announce: Option<u64>,
        sent: u64,
        fail_after: Option<u64>,
    }

    impl Endless {
        fn new(chunk: &'static [u8], total: Option<u64>) -> Self {
            Endless {
                chunk: Bytes::from_static(chunk),
                left: total,
                announce: None,
                sent: 0,
                fail_after: None,
            }
        }
    }

    impl Body for Endless {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            if self.fail_after.is_some_and(|n| self.sent >= n) {
                return Poll::Ready(Some(Err(std::io::Error::other("connection reset"))));
            }
            let mut chunk = self.chunk.clone();
            if let Some(left) = self.left {
                if left == 0 {
                    return Poll::Ready(None);
                }
                chunk.truncate(usize::try_from(left).unwrap().min(chunk.len()));
                self.left = Some(left - chunk.len() as u64);
            }
            self.sent += chunk.len() as u64;
            Poll::Ready(Some(Ok(Frame::data(chunk))))
        }

        fn size_hint(&self) -> SizeHint {
            self.announce
                .map_or_else(SizeHint::default, SizeHint::with_exact)
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_body_within_the_limit_is_read_whole() {
        let body = Endless::new(b"0123456789", Some(25));
        let bytes = block_on(read_limited(body, 25, "api", "call")).unwrap();
        assert_eq!(bytes.len(), 25);
        assert_eq!(&bytes[20..], b"01234");
    }

    #[test]
    fn an_endless_body_stops_one_byte_past_the_limit_naming_it() {
        let mut body = Endless::new(&[b'x'; 4096], None);
        body.fail_after = Some(1 << 20); // would fail if it read a MiB
        let e = block_on(read_limited(
            body,
            10_000,
            "EC2 http://h",
            "DescribeInstances",
        ))
        .unwrap_err();
        assert!(
            matches!(e, BodyError::TooLarge { limit: 10_000, .. }),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("EC2 http://h")
                && text.contains("DescribeInstances")
                && text.contains("10000"),
            "{text}"
        );
        // One byte more than the limit is too much; exactly the limit is not.
        let e = block_on(read_limited(Endless::new(b"ab", Some(11)), 10, "a", "c")).unwrap_err();
        assert!(matches!(e, BodyError::TooLarge { .. }));
        assert_eq!(
            block_on(read_limited(Endless::new(b"ab", Some(10)), 10, "a", "c"))
                .unwrap()
                .len(),
            10
        );
    }

    #[test]
    fn an_announced_length_over_the_limit_is_refused_before_reading() {
        let mut body = Endless::new(b"x", Some(5));
        body.announce = Some(2 << 30);
        body.fail_after = Some(0); // reading at all would be a transport error
        let e = block_on(read_limited(
            body,
            METADATA_LIMIT,
            "GCE metadata",
            "instance/zone",
        ))
        .unwrap_err();
        assert!(matches!(e, BodyError::TooLarge { .. }), "{e:?}");
    }

    #[test]
    fn a_transport_failure_is_a_read_error_with_its_source() {
        let mut body = Endless::new(b"abc", None);
        body.fail_after = Some(6);
        let e = block_on(read_limited(
            body,
            100,
            "vSphere SOAP",
            "RetrievePropertiesEx",
        ))
        .unwrap_err();
        assert!(matches!(e, BodyError::Read { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "reading the answer of vSphere SOAP to RetrievePropertiesEx"
        );
        assert_eq!(e.source().unwrap().to_string(), "connection reset");
    }

    #[test]
    fn a_prefix_of_an_error_answer_is_read_and_the_rest_dropped() {
        let (bytes, more) = block_on(read_prefix(Endless::new(&[b'e'; 1000], None)));
        assert_eq!(bytes.len() as u64, ERROR_PREFIX_LIMIT);
        assert!(more);
        let (bytes, more) = block_on(read_prefix(Endless::new(b"{\"error\": 1}", Some(12))));
        assert_eq!(bytes, b"{\"error\": 1}");
        assert!(!more);
        // A connection that breaks midway leaves what came before it.
        let mut broken = Endless::new(b"abc", None);
        broken.fail_after = Some(6);
        assert_eq!(block_on(read_prefix(broken)), (b"abcabc".to_vec(), false));
    }

    #[test]
    fn excerpts_are_short_escaped_and_marked_when_cut() {
        assert_eq!(excerpt(b"  not found\n"), "not found");
        assert_eq!(excerpt(b"a\nb\x1b[31mc\rd"), "a\\nb\\u{1b}[31mc\\rd");
        let big = vec![b'z'; 100 << 20];
        let e = excerpt(&big);
        assert!(e.starts_with(&"z".repeat(EXCERPT_CHARS)), "{e}");
        assert!(
            e.ends_with(&format!("… ({} bytes in all)", 100 << 20)),
            "{e}"
        );
        assert!(e.chars().count() < EXCERPT_CHARS + 40);
        // Multi-byte characters are counted as characters; invalid UTF-8 is replaced.
        let e = excerpt("é".repeat(300).as_bytes());
        assert!(
            e.starts_with(&"é".repeat(EXCERPT_CHARS)) && e.contains("600 bytes in all"),
            "{e}"
        );
        assert_eq!(excerpt(b"\xff\xfeok"), "\u{fffd}\u{fffd}ok");
        // Exactly the limit is not cut.
        assert_eq!(excerpt(&[b'q'; EXCERPT_CHARS]), "q".repeat(EXCERPT_CHARS));
        // No line breaks survive, however the input is made.
        let nasty: Vec<u8> = (0u8..=255).cycle().take(5000).collect();
        let e = excerpt(&nasty);
        assert!(
            !e.contains('\n') && !e.contains('\r') && !e.chars().any(char::is_control),
            "{e:?}"
        );
    }

    #[test]
    fn a_limited_body_passes_what_fits_and_fails_past_the_limit() {
        let fits = Limited::new(Endless::new(b"0123456789", Some(30)), 30, "a", "c");
        assert_eq!(
            block_on(read_limited(fits, u64::MAX, "outer", "c"))
                .unwrap()
                .len(),
            30
        );
        let mut endless = Endless::new(&[b'x'; 4096], None);
        endless.fail_after = Some(1 << 20);
        let capped = Limited::new(endless, 5000, "AWS ec2.example", "POST /");
        let e = block_on(read_limited(capped, u64::MAX, "outer", "c")).unwrap_err();
        let BodyError::Read { source, .. } = e else {
            panic!("{e:?}")
        };
        assert!(
            source.to_string().contains("AWS ec2.example") && source.to_string().contains("5000"),
            "{source}"
        );
        let mut announced = Endless::new(b"x", Some(1));
        announced.announce = Some(1 << 40);
        announced.fail_after = Some(0);
        let e = block_on(read_limited(
            Limited::new(announced, 10, "a", "c"),
            u64::MAX,
            "o",
            "c",
        ))
        .unwrap_err();
        let BodyError::Read { source, .. } = e else {
            panic!("{e:?}")
        };
        assert!(
            source
                .to_string()
                .contains("larger than the limit of 10 bytes"),
            "{source}"
        );
    }

    #[test]
    fn redirects_are_refused_naming_the_target() {
        assert!(refuse_redirect(200, None, "IMDS", "GET /").is_ok());
        assert!(refuse_redirect(404, None, "IMDS", "GET /").is_ok());
        let e = refuse_redirect(
            302,
            Some(b"http://127.0.0.2:8080/x\n"),
            "IMDS http://127.0.0.1",
            "GET /latest/api/token",
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("redirect (HTTP 302) to http://127.0.0.2:8080/x;")
                && text.contains("IMDS http://127.0.0.1"),
            "{text}"
        );
    }
}
