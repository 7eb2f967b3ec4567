//! Integration tests of the vSphere provider against VMware's vCenter simulator. One test
//! binary (`tests/it/`), as every crate has.

mod credentials_secret;
mod disks;
mod multi_vcenter;
mod vcsim;
