//! hypercloud-localcloud: a one-machine cloud that speaks the OpenStack APIs — Identity v3,
//! Compute v2.1, Network v2.0, Block Storage v3, Load Balancer v2 and the metadata service with config drives —
//! so that hypercloud's `openstack` provider, the official `openstack` CLI and a learner all see
//! a real cloud API without a real cloud. Instances, networks and volumes are durable records
//! (see [`store`]), not VMs: nothing is booted and no traffic is sent to the simulated addresses.
//! Load balancers (Load Balancer v2, Octavia) are the exception: their listeners really bind a
//! loopback VIP and proxy to the members (see [`dataplane`]). It is what `hypercloud local-cloud` runs.
//! Upstream equivalent: DevStack, i.e. Keystone, Nova, Neutron, Cinder, Octavia and
//! nova-api-metadata on one machine. The same records also answer as Compute Engine v1 (the GCE
//! dialect, `/compute/v1`, with a GCE metadata server), so Google's clients and the `gce`
//! provider see a GCE project.
//!
//! ```no_run
//! # async fn demo() -> hypercloud_localcloud::Result<()> {
//! use hypercloud_localcloud::{Server, ServerConfig};
//! let handle = Server::bind(ServerConfig::ephemeral("/tmp/my-cloud")).await?;
//! println!("Keystone at {}/identity/v3", handle.api_url());
//! handle.shutdown().await
//! # }
//! ```

pub(crate) mod api;
mod cli;
pub mod dataplane;
pub mod defaults;
mod error;
pub mod faults;
pub(crate) mod metadata;
pub(crate) mod model;
mod server;
pub mod store;
mod time;
mod tls;

pub use api::Service;
pub use cli::{
    run, Command, InstanceCommand, LocalCloudArgs, Output, OutputArgs, ServeArgs, VolumeCommand,
};
pub use error::{Error, Result};
pub use server::{Server, ServerConfig, ServerHandle};
pub use tls::TlsFiles;
