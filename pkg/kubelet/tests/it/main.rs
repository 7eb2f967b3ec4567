//! Integration tests of the node-side logic against a real kube-apiserver. One test binary
//! (`tests/it/`), as every crate has.

mod register;
