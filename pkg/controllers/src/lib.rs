//! The cloud controllers of hypercloud, as run by the `cloud-controller-manager` and (in-tree)
//! the `controller-manager` personalities; upstream `k8s.io/cloud-provider/controllers` and
//! the cloud-dependent controllers of kube-controller-manager.
//!
//! [`names`] holds the stable controller names and their aliases and resolves a
//! `--controllers` list into the set to run.

pub mod names;
