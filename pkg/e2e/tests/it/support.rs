//! What the scenarios share beyond `hypercloud_testenv`'s process-level helpers (processes,
//! the local cloud's server, Nodes, waiting, the stand-in for kube-proxy): the binary under
//! its personality names, the local cloud of a scenario, the cluster checks and the webhook
//! configurations.
#![allow(dead_code, clippy::unwrap_used)]

pub mod cloud;
pub mod cluster;
pub mod process;
pub mod trace;
pub mod webhooks;
