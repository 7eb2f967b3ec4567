//! Integration tests of the test environment itself, as one test binary (one link instead of
//! one per file): [`failure`] (a failed start names its step), [`node`] (a Node's life
//! against the real apiserver), [`script`] (`hack/envtest.sh start | env | stop`),
//! [`csi_tools`] (the upstream CSI tools of `hack/csi-tools.sh` report their pinned versions).

mod csi_tools;
mod failure;
mod node;
mod script;
