//! Integration tests of the OpenStack provider against a real local cloud in process (free
//! ports, its own state directory per test). One test binary (`tests/it/`), one module per
//! area: one link instead of one per file. The tests share nothing but the process, so they
//! take no group lock (`hypercloud_testenv::group`).

mod auth;
mod credentials_secret;
mod faults;
mod instances;
mod loadbalancer;
mod metadata_volumes;
mod rackspace;
mod routes;
mod support;
mod tls;
