//! The cloud provider contract of hypercloud: what every Kubernetes component may ask a cloud.
//!
//! This is the Rust form of upstream `k8s.io/cloud-provider` (`cloud.go`, `plugins.go`):
//! an [`Interface`] whose optional capabilities ([`Instances`], [`InstancesV2`],
//! [`LoadBalancer`], [`Zones`], [`Routes`], [`Clusters`]) are returned as `Option<&dyn _>`
//! where Go returns `(impl, supported bool)`; a [`Registry`] of provider factories keyed by
//! the `--cloud-provider` name; [`Instrumented`], a wrapper that times and counts every
//! call into Prometheus metrics and can write each call as a JSON line for the teaching
//! views; and a recording in-memory [`fake`] provider for tests and demos.
//!
//! ```
//! use hypercloud_cloudprovider::{fake::FakeCloud, capabilities, Interface};
//! let cloud = FakeCloud::from_config_bytes(b"instances: []", "inline").expect("valid config");
//! let found: Vec<_> = capabilities(&cloud).into_iter().filter(|c| c.supported).map(|c| c.name).collect();
//! assert!(found.contains(&"instances-v2"));
//! ```
//!
//! Start here: [`Interface`] and its capability traits (`src/cloud.rs`), then [`Registry`] (how
//! `--cloud-provider` finds a factory) and [`Instrumented`] (what every call goes through);
//! [`fake::FakeCloud`] is the provider to test with.
//!
//! Not here: any cloud's client (each is a `hypercloud-providers-*` crate under `pkg/providers/`)
//! or any controller. The small modules beside the traits ([`gcfg`], [`http_body`], [`pager`],
//! [`wait`], ...) are helpers every provider shares, so each protocol detail is decided once.

mod cloud;
pub mod credential_secret;
pub mod csi_drivers;
pub mod duration;
mod error;
pub mod fake;
#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
pub mod gcfg;
pub mod http_body;
pub mod http_client;
pub mod input;
mod instrumented;
pub mod lb_settings;
pub mod lb_webhook;
pub mod listing;
pub mod names;
pub mod node;
pub mod pager;
mod registry;
pub mod retry;
pub mod ssh;
pub mod throttle;
pub mod volume;
pub mod wait;
pub mod webhook;
pub mod wellknown;
pub mod xml;
pub mod yaml;

pub use cloud::{
    capabilities, cinder_class_parameters, default_load_balancer_name, Capability, ClassParameters,
    CloudVolume, Clusters, InstanceMetadata, Instances, InstancesV2, Interface, LoadBalancer,
    ProvisionedVolume, PvLabeler, Route, Routes, VolumeAttacher, VolumeFilter, VolumeProvisioner,
    VolumeRequest, Zone, Zones,
};
pub use error::{BoxError, Chain, Error, Message, ProviderError, Result, Startup};
pub use instrumented::{CallTracer, Instrumented, ProviderMetrics, TraceRecord};
pub use lb_settings::{LbSetting, Setting, Support};
pub use registry::{is_external, CloudConfig, Factory, Layout, ProviderInfo, Registry, EXTERNAL};
pub use webhook::{WebhookSpec, Webhooks};

// The guide's worked example is Markdown for readers and doc tests for us: every Rust block in
// it is compiled and run by `cargo test --doc`, so the guide cannot drift from the contract.
#[doc = include_str!("../../../docs/guide/writing-a-provider.md")]
#[cfg(doctest)]
pub struct WritingAProviderGuide;
