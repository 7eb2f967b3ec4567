//! hypercloud-providers-azure: the `azure` cloud provider (so far its configuration and its
//! Resource Manager client).
//!
//! Upstream equivalent: kubernetes-sigs/cloud-provider-azure (`pkg/provider`, formerly the
//! in-tree `legacy-cloud-providers/azure`). Its `--cloud-config` is `azure.json`, read here by
//! [`config::Config::parse`]; the cloud's endpoints (Azure Resource Manager, the Entra ID login
//! endpoint, the token resource) come from the named cloud, or for `AzureStackCloud` from the
//! go-autorest environment file named by `AZURE_ENVIRONMENT_FILEPATH`
//! ([`config::Environment`]). [`client::Arm`] calls Resource Manager with Microsoft's SDK for
//! Rust (azure_core's pipeline, azure_identity's credentials), typed by [`models`].
//!
//! Not here yet: the capabilities. Not planned: scale sets (`vmType` `vmss`, `vmssflex`),
//! reading the config from the `kube-system/azure-cloud-provider` Secret.

pub mod client;
pub mod config;
pub mod error;
pub mod models;

pub use client::{Arm, ArmOptions};
pub use error::{Error, Result};
