//! Shared command-line flag groups of the hypercloud personalities.
//!
//! Each group is a `clap::Args` struct that a personality flattens into its own flags, so a
//! flag has one name, one default and one help text everywhere. Names and defaults are the
//! upstream ones (`k8s.io/cloud-provider/options`, `component-base` logging, kubelet and
//! kube-controller-manager flags); Go duration values such as `5m0s` parse with
//! [`GoDuration`]. Every flag can also be set from an environment variable named after it
//! (`HYPERCLOUD_CLOUD_PROVIDER` for `--cloud-provider`).
//!
//! Start here: [`CloudProviderOptions`], [`ControllerOptions`] (the controller managers' groups,
//! `src/controller_manager.rs`) and [`GoDuration`]; each personality's `Args` in `cmd/hypercloud`
//! flattens them.
//!
//! Not here: decisions that need a provider or a cluster (which controllers can run is
//! `hypercloud-controllers`' plan), or what a flag does: each group only parses and validates.

mod cloud;
mod controller_manager;
mod duration;
mod error;
mod kube_client;
mod logging;
pub mod rate_limit;
mod webhook;

pub use cloud::CloudProviderOptions;
pub use controller_manager::{
    non_empty_entries, AuthOptions, ControllerOptions, GenericControllerManagerOptions,
    KubeCloudSharedOptions, LeaderElectionOptions, LeaderMigrationOptions, NodeControllerOptions,
    NodeIpamOptions, SecureServingOptions, ServiceControllerOptions, MAX_CONCURRENT_SYNCS,
    RANGE_ALLOCATOR,
};
pub use duration::{GoDuration, MAX_DURATION};
pub use error::{Error, Result};
pub use kube_client::{parse_qps, KubeClientOptions};
pub use logging::{
    bound_line, LoggingFormat, LoggingOptions, MAX_LOG_LINE_BYTES, MAX_LOG_VALUE_BYTES,
};
pub use webhook::{
    CloudWebhookOptions, WebhookOptions, WebhookServingOptions, WEBHOOK_PAIR_NAME, WEBHOOK_PORT,
};
