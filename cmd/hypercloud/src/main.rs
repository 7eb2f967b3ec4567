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
mod cloud_node_manager;
mod configz;
mod controller_manager;
mod csi_driver;
mod kubelet_helper;
mod leader_migration;
mod local_cloud;
mod personality;
mod runtime;
mod trace;
mod version;

use std::process::ExitCode;

fn main() -> ExitCode {
    raise_open_files_limit();
    cli::main(std::env::args_os().collect())
}

/// Raises the soft limit on open files to the hard limit, as every Go binary does at start
/// (Go 1.19, `syscall.rlimit`): the soft default (often 1024) is far below what a server of
/// many connections needs, and the hard limit is what the operator allowed. Failure leaves
/// the limit as it was (nothing to report: it is no worse than before).
fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some() && limit.current != limit.maximum {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        );
    }
}
