//! Integration tests of the `hypercloud` binary: the built binary run under its personality
//! names against a real kube-apiserver (pkg/testenv), the local cloud and the other clouds'
//! simulators. One test binary (`tests/it/`), one module per area: one link instead of one per
//! file. The kube-apiserver is shared and many tests start cluster-wide controllers
//! (cloud-node-lifecycle deletes NotReady Nodes, service controllers pick up Services, leader
//! election uses fixed Lease names), so every test first takes its module's group
//! (`hypercloud_testenv::group`): only tests of one module run at once, as when each module was
//! a test binary of its own. Golden files stay in `tests/golden/`, recorded inputs in
//! `tests/data/`.

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_hypercloud");

mod apiserver_plugin;
mod aws_data_plane;
mod aws_provider;
mod azure_provider;
mod ccm_local_cloud;
mod ccm_node_ipam;
mod ccm_runtime;
mod ccm_webhooks;
mod cli;
mod cloudstack_provider;
mod controller_manager_attach_detach;
mod controller_manager_aws_attach;
mod controller_manager_aws_volumes;
mod controller_manager_gce_attach;
mod controller_manager_gce_volumes;
mod controller_manager_volumes;
mod controller_manager_vsphere_volumes;
mod csi_driver;
mod csi_driver_clouds;
mod csi_fixture;
mod deploy_manifests;
mod fault_proxy;
mod flag_inventory;
mod gce_provider;
mod help_golden;
mod hostile;
mod kubelet_helper;
mod kubelet_helper_metadata;
mod kubelet_helper_volumes;
mod lb_settings;
mod leader_migration;
mod legacy_provider;
mod local_cloud_gce;
mod local_cloud_openstack_cli;
mod local_cloud_openstacksdk;
mod local_cloud_process;
mod mesos_provider;
mod openstack_provider;
mod ovirt_provider;
mod photon_provider;
mod proxy;
mod rackspace_provider;
mod secrets_stay_secret;
mod trace_render;
mod upstream_manifests;
mod volume_fixtures;
mod vsphere_provider;
