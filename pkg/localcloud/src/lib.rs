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
//! # Where to start
//!
//! The crate is layered; each layer imports only from those below it:
//!
//! 1. [`store`]: durable tables of JSON objects (write-ahead log, snapshot, secondary index).
//! 2. `time` (timestamps, IDs), then `model/`: the typed records of every service under one
//!    `Record` trait (`model/record.rs`: table, names, not-found error, indexed fields, common
//!    `Meta`): `model/compute.rs` (Nova), `volume.rs` (Cinder), `network.rs` (Neutron),
//!    `octavia.rs` (load balancers, their relations and status roll-up), `gce.rs`, and the
//!    config drives derived from them (`config_drive.rs`). Start here to learn what the cloud
//!    stores.
//! 3. `http.rs`: `Service` and `ApiError`, what every HTTP service returns.
//! 4. [`dataplane`] (load balancers that really carry traffic) reads the records; [`faults`]
//!    injects errors and latency; `config.rs` holds `ServerConfig`; `api.rs` what every API
//!    shares (token checks, pagination, body parsing).
//! 5. `api/<service>`: one adapter per API, body in and view out: `identity` (Keystone),
//!    `compute` (Nova), `network` (Neutron), `volume` (Cinder), `image` (Glance),
//!    `loadbalancer` (Octavia), `gce` (Compute Engine); `metadata` serves the metadata
//!    documents over HTTP.
//! 6. `server` (binds the ports, runs the data plane) and `cli` (the `local-cloud` command).
//!
//! Two dialects answer from the same records: OpenStack (the services above, with DevStack's
//! path prefixes) and Compute Engine v1 (`api/gce`, `metadata/gce`).
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
mod aws_follow;
mod backing;
mod cli;
mod config;
pub mod dataplane;
pub use hypercloud_localcloud_defaults as defaults;
mod error;
pub mod faults;
mod http;
pub(crate) mod metadata;
pub(crate) mod model;
mod server;
pub mod store;
mod time;
mod tls;

pub use api::aws::HOSTS_FILE as AWS_HOSTS_FILE;
pub use aws_follow::{AddressMap, AwsFollow};
pub use backing::VolumeBacking;
pub use cli::{
    run, Command, EntraCertificateCommand, InstanceCommand, LocalCloudArgs, Output, OutputArgs,
    ServeArgs, VolumeCommand,
};
pub use error::{Error, Result};
pub use http::Service;
pub use server::{Server, ServerConfig, ServerHandle};
pub use tls::TlsFiles;
