//! What the scenarios share: the binary and its processes, the local cloud, the cluster
//! helpers, the webhook configurations and the stand-in for kube-proxy. (`support/mod.rs`
//! rather than `support.rs`, which cargo would build as a test of its own.)
#![allow(dead_code, clippy::unwrap_used)]

pub mod cloud;
pub mod cluster;
pub mod net;
pub mod process;
pub mod webhooks;
