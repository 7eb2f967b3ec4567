//! A CSI client on a unix socket, as the kubelet and the sidecars are: one typed method per
//! call this crate serves ([`Client::call`] for the rest). The kubelet-helper uses it for the
//! kubelet's half (NodeGetInfo, NodeStage/NodePublish); tests use it to drive a driver.

use std::path::{Path, PathBuf};

use http::uri::PathAndQuery;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};
use tonic::Status;

use crate::proto::*;
use crate::{Error, Result};

/// A connection to a CSI driver's socket.
#[derive(Clone, Debug)]
pub struct Client {
    channel: Channel,
}

impl Client {
    /// Connects to the socket of `endpoint` (`unix:///path` or a path).
    pub async fn connect(endpoint: &str) -> Result<Self> {
        let socket: PathBuf = crate::server::socket_path(endpoint)?;
        let channel = Endpoint::from_static("http://csi.invalid")
            .connect_with_connector(tower::service_fn(move |_| {
                let socket = socket.clone();
                async move {
                    tokio::net::UnixStream::connect(&socket)
                        .await
                        .map(TokioIo::new)
                }
            }))
            .await
            .map_err(|e| Error::Endpoint {
                endpoint: endpoint.to_owned(),
                why: format!("cannot connect: {e}"),
            })?;
        Ok(Self { channel })
    }

    /// Connects to a socket path.
    pub async fn connect_path(path: &Path) -> Result<Self> {
        Self::connect(&path.to_string_lossy()).await
    }

    /// One unary call of `method` (`/csi.v1.Node/NodeGetInfo`).
    pub async fn call<Req, Resp>(
        &self,
        method: &'static str,
        request: Req,
    ) -> std::result::Result<Resp, Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(format!("{method}: {e}")))?;
        grpc.unary(
            tonic::Request::new(request),
            PathAndQuery::from_static(method),
            tonic_prost::ProstCodec::<Req, Resp>::default(),
        )
        .await
        .map(tonic::Response::into_inner)
    }
}

macro_rules! calls {
    ($($(#[$doc:meta])* $func:ident: $path:literal, $req:ty => $resp:ty;)*) => {
        impl Client {
            $(
                $(#[$doc])*
                pub async fn $func(&self, request: $req) -> std::result::Result<$resp, Status> {
                    self.call($path, request).await
                }
            )*
        }
    };
}

calls! {
    /// `Identity/GetPluginInfo`.
    get_plugin_info: "/csi.v1.Identity/GetPluginInfo", GetPluginInfoRequest => GetPluginInfoResponse;
    /// `Identity/GetPluginCapabilities`.
    get_plugin_capabilities: "/csi.v1.Identity/GetPluginCapabilities", GetPluginCapabilitiesRequest => GetPluginCapabilitiesResponse;
    /// `Identity/Probe`.
    probe: "/csi.v1.Identity/Probe", ProbeRequest => ProbeResponse;
    /// `Controller/CreateVolume`.
    create_volume: "/csi.v1.Controller/CreateVolume", CreateVolumeRequest => CreateVolumeResponse;
    /// `Controller/DeleteVolume`.
    delete_volume: "/csi.v1.Controller/DeleteVolume", DeleteVolumeRequest => DeleteVolumeResponse;
    /// `Controller/ControllerPublishVolume`.
    controller_publish_volume: "/csi.v1.Controller/ControllerPublishVolume", ControllerPublishVolumeRequest => ControllerPublishVolumeResponse;
    /// `Controller/ControllerUnpublishVolume`.
    controller_unpublish_volume: "/csi.v1.Controller/ControllerUnpublishVolume", ControllerUnpublishVolumeRequest => ControllerUnpublishVolumeResponse;
    /// `Controller/ValidateVolumeCapabilities`.
    validate_volume_capabilities: "/csi.v1.Controller/ValidateVolumeCapabilities", ValidateVolumeCapabilitiesRequest => ValidateVolumeCapabilitiesResponse;
    /// `Controller/ListVolumes`.
    list_volumes: "/csi.v1.Controller/ListVolumes", ListVolumesRequest => ListVolumesResponse;
    /// `Controller/ControllerExpandVolume`.
    controller_expand_volume: "/csi.v1.Controller/ControllerExpandVolume", ControllerExpandVolumeRequest => ControllerExpandVolumeResponse;
    /// `Node/NodeGetInfo`.
    node_get_info: "/csi.v1.Node/NodeGetInfo", NodeGetInfoRequest => NodeGetInfoResponse;
    /// `Node/NodeStageVolume`.
    node_stage_volume: "/csi.v1.Node/NodeStageVolume", NodeStageVolumeRequest => NodeStageVolumeResponse;
    /// `Node/NodeUnstageVolume`.
    node_unstage_volume: "/csi.v1.Node/NodeUnstageVolume", NodeUnstageVolumeRequest => NodeUnstageVolumeResponse;
    /// `Node/NodePublishVolume`.
    node_publish_volume: "/csi.v1.Node/NodePublishVolume", NodePublishVolumeRequest => NodePublishVolumeResponse;
    /// `Node/NodeUnpublishVolume`.
    node_unpublish_volume: "/csi.v1.Node/NodeUnpublishVolume", NodeUnpublishVolumeRequest => NodeUnpublishVolumeResponse;
    /// `Node/NodeExpandVolume`.
    node_expand_volume: "/csi.v1.Node/NodeExpandVolume", NodeExpandVolumeRequest => NodeExpandVolumeResponse;
    /// `Node/NodeGetVolumeStats`.
    node_get_volume_stats: "/csi.v1.Node/NodeGetVolumeStats", NodeGetVolumeStatsRequest => NodeGetVolumeStatsResponse;
}
