//! `hypercloud`: one binary for every Kubernetes component that talks to a cloud.
//!
//! Like hyperkube, it picks its personality from the name it is invoked under (a symlink
//! such as `cloud-controller-manager`) or from its first argument. `main` only maps the
//! outcome to an exit code; [`cli`] parses, [`personality`] holds the name table, and each
//! personality has a module of its own.

mod apiserver_plugin;
mod cli;
mod cloud;
mod cloud_controller_manager;
mod configz;
mod controller_manager;
mod kubelet_helper;
mod leader_migration;
mod local_cloud;
mod personality;
mod runtime;
mod trace;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main(std::env::args_os().collect())
}
