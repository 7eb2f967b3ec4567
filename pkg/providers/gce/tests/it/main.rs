//! Integration tests of the gce provider against the local cloud's Compute Engine dialect,
//! started in process on free ports (one test binary, a module per capability).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod credentials;
mod disks;
mod support;
