//! Hostile input against the real binary (issue #29): every class of defect the attack found,
//! tried on every personality and provider it can reach, each test able to fail. One module of
//! the crate's test binary, one submodule per class of defect; all its tests are one group
//! (`hypercloud_testenv::group`), as when they were a test binary of their own.
//!
//! - [`files`]: files handed to us by flag or environment (size limits, FIFOs, devices), values
//!   handed to third-party SDKs, SSH keys and users that would inject metadata entries.
//! - [`bodies`]: huge, endless and hostile answers from cloud APIs and metadata servers; error
//!   messages quote short, sanitised excerpts; redirects refused where no server redirects.
//! - [`waits`]: timeouts on every call, bounded pagination with repeated-token checks, back-off
//!   on every wait.
//! - [`dialects`]: the local cloud's dialects refuse malformed writes without changing anything.
//! - [`servers`]: bad flag values refused by name, servers under file-descriptor exhaustion and
//!   idle connections, bounded logs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bodies;
mod dialects;
mod files;
mod servers;
mod support;
mod waits;
