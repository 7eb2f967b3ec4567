//! `HTTP` listeners with `insert_headers`: what haproxy's `mode http` with `option forwardfor`
//! (and `http-request set-header X-Forwarded-Port/-Proto`) does in an amphora. Each request
//! head the client sends is read (HTTP/1.x, up to [`MAX_HEAD`] bytes), the wanted headers are
//! appended to it (`X-Forwarded-For: <client address>` as a new header line, as haproxy adds
//! it), and its body is passed on by `Content-Length` or chunk by chunk, so every request of
//! a keep-alive (or pipelined) connection gets its header. Answers are copied back untouched.
//! A connection stays on the member chosen when it opened; after an `Upgrade` or `CONNECT`
//! request the rest is copied as it is. A head that is not HTTP or too long closes the
//! connection (haproxy would answer 400).

use std::net::SocketAddr;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// haproxy's default `tune.bufsize` bounds a request head the same way.
const MAX_HEAD: usize = 16 * 1024;

/// The headers an `HTTP` listener adds (Octavia's `insert_headers`, each `"true"`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Insert {
    pub(super) forwarded_for: bool,
    pub(super) forwarded_port: bool,
    pub(super) forwarded_proto: bool,
}

impl Insert {
    /// From a listener of `protocol` with `insert_headers`: nothing unless it is `HTTP`.
    pub(super) fn of<'a>(
        protocol: &str,
        headers: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Insert {
        let mut out = Insert::default();
        if protocol != "HTTP" {
            return out;
        }
        for (k, v) in headers {
            let on = v.eq_ignore_ascii_case("true");
            match k.to_ascii_lowercase().as_str() {
                "x-forwarded-for" => out.forwarded_for = on,
                "x-forwarded-port" => out.forwarded_port = on,
                "x-forwarded-proto" => out.forwarded_proto = on,
                _ => {}
            }
        }
        out
    }

    pub(super) fn any(&self) -> bool {
        self.forwarded_for || self.forwarded_port || self.forwarded_proto
    }

    fn lines(&self, peer: SocketAddr, local: SocketAddr) -> String {
        let mut out = String::new();
        if self.forwarded_for {
            let ip = match peer.ip() {
                std::net::IpAddr::V6(v6) => {
                    v6.to_ipv4_mapped().map_or(peer.ip(), std::net::IpAddr::V4)
                }
                v4 => v4,
            };
            out.push_str(&format!("X-Forwarded-For: {ip}\r\n"));
        }
        if self.forwarded_port {
            out.push_str(&format!("X-Forwarded-Port: {}\r\n", local.port()));
        }
        if self.forwarded_proto {
            out.push_str("X-Forwarded-Proto: http\r\n");
        }
        out
    }
}

/// How a request's body ends.
#[derive(Debug, PartialEq, Eq)]
enum Body {
    Length(u64),
    Chunked,
    /// `Upgrade`/`CONNECT`: everything after the head is the new protocol's.
    Tunnel,
}

/// A request head (without its blank line) and its body framing; `None` when it is not one.
fn parse_head(head: &[u8]) -> Option<(Vec<&[u8]>, Body)> {
    let text = std::str::from_utf8(head).ok()?;
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| !l.is_empty())
        .collect();
    let request = lines.first()?;
    let mut parts = request.split(' ');
    let method = parts.next()?;
    let _target = parts.next()?;
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let mut body = Body::Length(0);
    let mut upgrade = method == "CONNECT";
    for line in &lines[1..] {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" if body != Body::Chunked => {
                body = Body::Length(value.parse().ok()?);
            }
            "transfer-encoding" => {
                // The last coding decides; only chunked framing is known here.
                if !value.to_ascii_lowercase().trim_end().ends_with("chunked") {
                    return None;
                }
                body = Body::Chunked;
            }
            "upgrade" => upgrade = true,
            _ => {}
        }
    }
    if upgrade {
        body = Body::Tunnel;
    }
    let raw = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.is_empty())
        .collect();
    Some((raw, body))
}

/// Reads one request head (through its blank line); `Ok(None)` at a clean end of the stream.
async fn read_head<R: AsyncBufReadExt + Unpin>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let n = (&mut *r)
            .take((MAX_HEAD + 1 - before) as u64)
            .read_until(b'\n', &mut head)
            .await?;
        if n == 0 {
            return if head.iter().all(|b| b.is_ascii_whitespace()) {
                Ok(None)
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            };
        }
        if head.len() > MAX_HEAD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        let line = &head[before..];
        if line == b"\r\n" || line == b"\n" {
            // Empty lines before a request line are skipped (RFC 9112 2.2).
            if head[..before].iter().all(|b| b.is_ascii_whitespace()) {
                head.clear();
                continue;
            }
            return Ok(Some(head));
        }
    }
}

/// Copies one line (through `\n`) from `r` to `w`, returning it.
async fn copy_line<R, W>(r: &mut R, w: &mut W) -> std::io::Result<Vec<u8>>
where
    R: AsyncBufReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut line = Vec::new();
    (&mut *r)
        .take(MAX_HEAD as u64)
        .read_until(b'\n', &mut line)
        .await?;
    if !line.ends_with(b"\n") {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    w.write_all(&line).await?;
    Ok(line)
}

/// Copies exactly `n` bytes.
async fn copy_exact<R, W>(r: &mut R, w: &mut W, n: u64) -> std::io::Result<()>
where
    R: AsyncBufReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let copied = tokio::io::copy(&mut (&mut *r).take(n), w).await?;
    if copied < n {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// The client's requests, each with the inserted headers, to the member; returns the bytes sent.
async fn requests<R, W>(
    r: &mut R,
    w: &mut W,
    peer: SocketAddr,
    local: SocketAddr,
    insert: Insert,
) -> std::io::Result<u64>
where
    R: AsyncBufReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let added = insert.lines(peer, local);
    let mut sent = 0u64;
    loop {
        let Some(head) = read_head(r).await? else {
            return Ok(sent);
        };
        let Some((lines, body)) = parse_head(&head) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not an HTTP/1 request",
            ));
        };
        let mut out = Vec::with_capacity(head.len() + added.len());
        for line in lines {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(added.as_bytes());
        out.extend_from_slice(b"\r\n");
        w.write_all(&out).await?;
        sent += out.len() as u64;
        match body {
            Body::Length(n) => {
                copy_exact(r, w, n).await?;
                sent += n;
            }
            Body::Chunked => loop {
                let line = copy_line(r, w).await?;
                sent += line.len() as u64;
                let size = std::str::from_utf8(&line)
                    .ok()
                    .and_then(|l| l.split(';').next())
                    .and_then(|s| u64::from_str_radix(s.trim(), 16).ok())
                    .ok_or_else(|| {
                        std::io::Error::new(std::io::ErrorKind::InvalidData, "bad chunk size")
                    })?;
                if size == 0 {
                    // Trailers, through the blank line.
                    loop {
                        let t = copy_line(r, w).await?;
                        sent += t.len() as u64;
                        if t == b"\r\n" || t == b"\n" {
                            break;
                        }
                    }
                    break;
                }
                copy_exact(r, w, size).await?;
                let crlf = copy_line(r, w).await?;
                sent += size + crlf.len() as u64;
            },
            Body::Tunnel => {
                w.flush().await?;
                return Ok(sent + tokio::io::copy(r, w).await?);
            }
        }
        w.flush().await?;
    }
}

/// Proxies one client connection to `backend`, inserting the headers into every request.
/// Returns the bytes sent up and down, as `copy_bidirectional`.
pub(super) async fn forward(
    client: TcpStream,
    backend: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    insert: Insert,
) -> std::io::Result<(u64, u64)> {
    let (client_r, mut client_w) = client.into_split();
    let (mut backend_r, mut backend_w) = backend.into_split();
    let up = async move {
        let mut reader = BufReader::new(client_r);
        let sent = requests(&mut reader, &mut backend_w, peer, local, insert).await;
        // The client is done (or broke the protocol): half-close towards the member.
        let _ = backend_w.shutdown().await;
        sent
    };
    let down = async move {
        let got = tokio::io::copy(&mut backend_r, &mut client_w).await;
        let _ = client_w.shutdown().await;
        got
    };
    let (up, down) = tokio::join!(up, down);
    Ok((up.unwrap_or(0), down?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_request_gets_the_headers_and_bodies_pass_whole() {
        let input = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n\
POST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello\
POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n\
GET /d HTTP/1.1\r\nX-Forwarded-For: 10.9.9.9\r\n\r\n";
        let mut r = BufReader::new(&input[..]);
        let mut out = Vec::new();
        let peer: SocketAddr = "127.0.0.1:40000".parse().expect("an address");
        let local: SocketAddr = "127.0.100.2:80".parse().expect("an address");
        let insert = Insert {
            forwarded_for: true,
            forwarded_port: true,
            forwarded_proto: false,
        };
        let sent = requests(&mut r, &mut out, peer, local, insert)
            .await
            .expect("forwarded");
        let text = String::from_utf8(out).expect("text");
        assert_eq!(sent, text.len() as u64);
        let add = "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Port: 80\r\n\r\n";
        assert_eq!(
            text,
            format!(
                "GET /a HTTP/1.1\r\nHost: x\r\n{add}\
POST /b HTTP/1.1\r\nContent-Length: 5\r\n{add}hello\
POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n{add}3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n\
GET /d HTTP/1.1\r\nX-Forwarded-For: 10.9.9.9\r\n{add}"
            )
        );
    }

    #[tokio::test]
    async fn a_request_that_is_not_http_is_refused() {
        let mut r = BufReader::new(&b"SSH-2.0-OpenSSH\r\n\r\n"[..]);
        let peer: SocketAddr = "127.0.0.1:1".parse().expect("an address");
        let insert = Insert {
            forwarded_for: true,
            ..Insert::default()
        };
        assert!(requests(&mut r, &mut Vec::new(), peer, peer, insert)
            .await
            .is_err());
        let listener = [("X-Forwarded-For".to_owned(), "true".to_owned())];
        let of = |p: &str| Insert::of(p, listener.iter().map(|(k, v)| (k, v)));
        assert!(of("HTTP").forwarded_for);
        assert!(!of("TCP").any());
    }
}
