//! Integration tests of Lease-based leader election against a real kube-apiserver. One test
//! binary (`tests/it/`), as every crate has.

mod lease;
