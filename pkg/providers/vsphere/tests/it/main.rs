//! Integration tests of the vSphere provider against VMware's vCenter simulator. One test
//! binary (`tests/it/`), as every crate has.

mod disks;
mod vcsim;
