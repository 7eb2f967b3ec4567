//! The end-to-end scenarios (see the crate docs). One test binary (`tests/it/`), one module per
//! scenario; each takes its module's group (`hypercloud_testenv::group`) first, so scenarios
//! never overlap on the shared kube-apiserver, as when each file was its own process.

mod csi_sidecars;
mod external;
mod helm_install;
mod in_tree;
mod instance_power;
mod leader_migration_upstream;
mod support;
