//! The data plane around a load balancer in tests: a backend on a Node's InternalIP:nodePort
//! (what kube-proxy plus a pod answer on a real node) and one client request through the VIP.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Answers `reply` to every TCP connection on `addr` until dropped.
pub struct Backend(tokio::task::JoinHandle<()>);

impl Backend {
    pub async fn start(addr: SocketAddr, reply: String) -> Backend {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .unwrap_or_else(|e| panic!("binding the backend on {addr}: {e}"));
        Backend(tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let reply = reply.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = conn.read(&mut buf).await;
                    let _ = conn.write_all(reply.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        }))
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One HTTP/1.0 request to `addr` (2 s to connect, 2 s to answer); the answer, or `None` when
/// the connection fails or the answer is empty.
pub async fn request(addr: SocketAddr) -> Option<String> {
    let connect = tokio::net::TcpStream::connect(addr);
    let mut conn = tokio::time::timeout(Duration::from_secs(2), connect)
        .await
        .ok()?
        .ok()?;
    conn.write_all(b"GET / HTTP/1.0\r\n\r\n").await.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(2), conn.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::free_port;

    #[tokio::test]
    async fn a_request_gets_the_backends_reply() {
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let reply = "HTTP/1.0 200 OK\r\n\r\nhello\n".to_owned();
        let _backend = Backend::start(addr, reply.clone()).await;
        assert_eq!(request(addr).await, Some(reply));
        // Nothing listens on another free port.
        let closed: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        assert_eq!(request(closed).await, None);
    }
}
