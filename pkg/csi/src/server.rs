//! The gRPC side: the three CSI services (`csi.v1.Identity`, `csi.v1.Controller`,
//! `csi.v1.Node`) dispatched by method path to the [`Driver`], served on a unix socket.
//!
//! The dispatch is written here rather than generated from the spec's `.proto`: each method
//! is one line of a table (`routes!`), decoded and encoded with prost by tonic's own server.
//! A method the driver does not serve (snapshots, GetCapacity, ...) answers `Unimplemented`,
//! as the spec requires of a capability a plugin does not advertise. A panic in a handler
//! becomes an `Internal` status for that call; the server keeps serving.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::FutureExt as _;
use tonic::body::Body;
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::Status;

use crate::driver::Driver;
use crate::{Error, Result};

type StdError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Runs one unary call: decodes `Req`, awaits `handler`, encodes its answer (or its status).
async fn unary<Req, Resp, F, Fut, B>(
    method: &'static str,
    req: http::Request<B>,
    handler: F,
) -> http::Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
    F: FnOnce(Req) -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<Resp, Status>> + Send + 'static,
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    struct Once<F>(&'static str, Option<F>);
    impl<Req, Resp, F, Fut> UnaryService<Req> for Once<F>
    where
        Req: Send + 'static,
        Resp: Send + 'static,
        F: FnOnce(Req) -> Fut + Send + 'static,
        Fut: Future<Output = std::result::Result<Resp, Status>> + Send + 'static,
    {
        type Response = Resp;
        type Future = BoxFuture<'static, std::result::Result<tonic::Response<Resp>, Status>>;
        fn call(&mut self, request: tonic::Request<Req>) -> Self::Future {
            let method = self.0;
            let handler = self.1.take();
            Box::pin(async move {
                let Some(handler) = handler else {
                    return Err(Status::internal(format!("{method}: called twice")));
                };
                let outcome = AssertUnwindSafe(handler(request.into_inner()))
                    .catch_unwind()
                    .await;
                let result = match outcome {
                    Ok(r) => r,
                    Err(panic) => {
                        let what = panic
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        tracing::error!(method, panic = %what, "CSI call panicked");
                        Err(Status::internal(format!(
                            "{method}: internal error (panic: {what})"
                        )))
                    }
                };
                match &result {
                    Ok(_) => tracing::debug!(method, "CSI call succeeded"),
                    Err(s) => {
                        tracing::info!(method, code = ?s.code(), message = s.message(), "CSI call failed")
                    }
                }
                result.map(tonic::Response::new)
            })
        }
    }
    let mut grpc = Grpc::new(tonic_prost::ProstCodec::<Resp, Req>::default());
    grpc.unary(Once(method, Some(handler)), req).await
}

/// `match path { "/csi.v1.Svc/Method" => driver.method(request) ... }` for one service.
macro_rules! routes {
    ($driver:expr, $req:expr, $service:literal, { $($method:literal => $func:ident),* $(,)? }) => {{
        let driver = $driver.clone();
        let req = $req;
        let path = req.uri().path().to_owned();
        match path.as_str() {
            $(
                concat!("/", $service, "/", $method) => Box::pin(async move {
                    Ok(unary(concat!($service, "/", $method), req, move |r| async move { driver.$func(r).await }).await)
                }) as BoxFuture<'static, std::result::Result<http::Response<Body>, Infallible>>,
            )*
            other => {
                let msg = format!("{other}: not implemented by this driver");
                Box::pin(async move { Ok(Status::unimplemented(msg).into_http()) })
            }
        }
    }};
}

macro_rules! service {
    ($(#[$doc:meta])* $name:ident, $grpc_name:literal, { $($method:literal => $func:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(pub Arc<Driver>);

        impl NamedService for $name {
            const NAME: &'static str = $grpc_name;
        }

        impl<B> tower::Service<http::Request<B>> for $name
        where
            B: tonic::codegen::Body + Send + 'static,
            B::Error: Into<StdError> + Send + 'static,
        {
            type Response = http::Response<Body>;
            type Error = Infallible;
            type Future = BoxFuture<'static, std::result::Result<Self::Response, Infallible>>;

            fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
                Poll::Ready(Ok(()))
            }

            fn call(&mut self, req: http::Request<B>) -> Self::Future {
                routes!(self.0, req, $grpc_name, { $($method => $func),* })
            }
        }
    };
}

service!(
    /// `csi.v1.Identity`.
    IdentityService, "csi.v1.Identity", {
    "GetPluginInfo" => get_plugin_info,
    "GetPluginCapabilities" => get_plugin_capabilities,
    "Probe" => probe,
});

service!(
    /// `csi.v1.Controller` (registered only with `--provide-controller-service`).
    ControllerService, "csi.v1.Controller", {
    "CreateVolume" => create_volume,
    "DeleteVolume" => delete_volume,
    "ControllerPublishVolume" => controller_publish_volume,
    "ControllerUnpublishVolume" => controller_unpublish_volume,
    "ValidateVolumeCapabilities" => validate_volume_capabilities,
    "ListVolumes" => list_volumes,
    "ControllerGetCapabilities" => controller_get_capabilities,
    "ControllerExpandVolume" => controller_expand_volume,
});

service!(
    /// `csi.v1.Node` (registered only with `--provide-node-service`).
    NodeService, "csi.v1.Node", {
    "NodeStageVolume" => node_stage_volume,
    "NodeUnstageVolume" => node_unstage_volume,
    "NodePublishVolume" => node_publish_volume,
    "NodeUnpublishVolume" => node_unpublish_volume,
    "NodeGetVolumeStats" => node_get_volume_stats,
    "NodeExpandVolume" => node_expand_volume,
    "NodeGetCapabilities" => node_get_capabilities,
    "NodeGetInfo" => node_get_info,
});

/// The socket path of an `--endpoint` (`unix:///csi/csi.sock`, `unix:/csi/csi.sock` or a plain
/// path, as the upstream drivers take it); other schemes are refused by name.
pub fn socket_path(endpoint: &str) -> Result<PathBuf> {
    let path = if let Some(rest) = endpoint.strip_prefix("unix://") {
        rest
    } else if let Some(rest) = endpoint.strip_prefix("unix:") {
        rest
    } else if endpoint.contains("://") {
        return Err(Error::Endpoint {
            endpoint: endpoint.to_owned(),
            why: "only unix sockets are served (unix:///path/csi.sock)".into(),
        });
    } else {
        endpoint
    };
    if path.is_empty() {
        return Err(Error::Endpoint {
            endpoint: endpoint.to_owned(),
            why: "names no socket path".into(),
        });
    }
    Ok(PathBuf::from(path))
}

/// Binds the socket: refuses a path that exists and is not a socket, and a socket another
/// process still serves; removes a stale socket left by a driver that died (as the upstream
/// drivers do before listening).
pub fn bind(path: &Path) -> Result<tokio::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt as _;
    let bind_err = |why: String| Error::Endpoint {
        endpoint: path.display().to_string(),
        why,
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(bind_err("another process is serving on this socket".into()));
            }
            std::fs::remove_file(path)
                .map_err(|e| bind_err(format!("cannot remove the stale socket: {e}")))?;
        }
        Ok(_) => {
            return Err(bind_err(
                "the path exists and is not a socket; refusing to replace it".into(),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e.to_string())),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| bind_err(format!("cannot create {}: {e}", dir.display())))?;
    }
    tokio::net::UnixListener::bind(path).map_err(|e| bind_err(e.to_string()))
}

/// Serves the driver's services on `listener` until `shutdown` completes, then removes the
/// socket file.
pub async fn serve(
    driver: Arc<Driver>,
    listener: tokio::net::UnixListener,
    socket: PathBuf,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let mut builder = tonic::transport::Server::builder();
    let mut router = builder.add_service(IdentityService(driver.clone()));
    if driver.serves_controller() {
        router = router.add_service(ControllerService(driver.clone()));
    }
    if driver.serves_node() {
        router = router.add_service(NodeService(driver.clone()));
    }
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let served = router
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| Error::Serve(e.to_string()));
    let _ = std::fs::remove_file(&socket);
    served
}

/// A future that never completes (serve until the process is stopped).
pub fn forever() -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(futures::future::pending())
}
