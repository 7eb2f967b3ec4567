//! Integration tests of the local cloud over HTTP, one test binary with a module per service
//! (one link instead of one per file).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod azure;
mod azure_certificates;
mod azure_imds;
mod backing;
mod cloudstack;
mod compute;
mod dialects;
mod durability;
mod faults;
mod gce_disks;
mod hardening;
mod identity;
mod loadbalancer;
mod mesos;
mod metadata;
mod network;
mod ovirt;
mod photon;
mod rackspace;
mod security_groups;
mod support;
mod timestamps;
mod tls;
mod volume;
