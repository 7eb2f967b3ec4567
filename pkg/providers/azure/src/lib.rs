//! hypercloud-providers-azure: the `azure` cloud provider (so far only its configuration).
//!
//! Upstream equivalent: kubernetes-sigs/cloud-provider-azure (`pkg/provider`, formerly the
//! in-tree `legacy-cloud-providers/azure`). Its `--cloud-config` is `azure.json`, read here by
//! [`config::Config::parse`]; the cloud's endpoints (Azure Resource Manager, the Entra ID login
//! endpoint, the token resource) come from the named cloud, or for `AzureStackCloud` from the
//! go-autorest environment file named by `AZURE_ENVIRONMENT_FILEPATH`
//! ([`config::Environment`]).
//!
//! Not here yet: the ARM client, the capabilities. Not planned: scale sets (`vmType` `vmss`,
//! `vmssflex`), reading the config from the `kube-system/azure-cloud-provider` Secret.

pub mod config;
pub mod error;
