//! Instances, InstancesV2 and Zones, as upstream's `azure_instances.go`, `azure_standard.go`
//! and `azure_zones.go` for `vmType: standard`: the VM of a node has the node's name, in the
//! config's resource group; the provider ID is the VM's resource ID after `azure://` (the
//! group's name lower-cased); the addresses are the primary NIC's primary IP configuration's
//! private address (InternalIP), the node name (Hostname) and its public IP's address
//! (ExternalIP); the instance type is the VM size; the zone is `<location>-<n>` for a zonal VM,
//! else its fault domain (`"0"`, `"1"`), the region the location (lower case); a VM whose power
//! state is `stopped`, `deallocating` or `deallocated` is shut down.

use async_trait::async_trait;
use hypercloud_cloudprovider::ProviderError as _;
use hypercloud_cloudprovider::{InstanceMetadata, Instances, InstancesV2, Zone, Zones};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::error::{Error, Result};
use crate::models::VirtualMachine;
use crate::models::{IpConfiguration, NetworkInterface, PublicIpAddress};
use crate::Azure;

/// `azure://`: the provider ID is this and the VM's resource ID.
pub const PROVIDER_ID_PREFIX: &str = "azure://";

/// The provider ID of VM `name` in group `group` of `subscription` (the group lower-cased, as
/// upstream's `convertResourceGroupNameToLower`).
pub fn provider_id(subscription: &str, group: &str, name: &str) -> String {
    format!(
        "{PROVIDER_ID_PREFIX}/subscriptions/{subscription}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{name}",
        group.to_lowercase()
    )
}

/// `(resource group, VM name)` of a provider ID.
pub fn parse_provider_id(id: &str) -> Result<(String, String)> {
    let bad = || Error::ProviderId(id.into());
    let rest = id.strip_prefix(PROVIDER_ID_PREFIX).ok_or_else(bad)?;
    let segs: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    match segs.as_slice() {
        [subs, _, groups, group, providers, ns, vms, name]
            if subs.eq_ignore_ascii_case("subscriptions")
                && groups.eq_ignore_ascii_case("resourceGroups")
                && providers.eq_ignore_ascii_case("providers")
                && ns.eq_ignore_ascii_case("Microsoft.Compute")
                && vms.eq_ignore_ascii_case("virtualMachines")
                && !group.is_empty()
                && !name.is_empty() =>
        {
            Ok(((*group).to_owned(), (*name).to_owned()))
        }
        _ => Err(bad()),
    }
}

/// The VM's power state (`running`, `deallocated`), from its instance view; none reads as
/// `stopped`, as upstream's `GetPowerStatusByNodeName`.
pub(crate) fn power_state(vm: &VirtualMachine) -> String {
    vm.properties
        .instance_view
        .as_ref()
        .and_then(|v| {
            v.statuses
                .iter()
                .filter_map(|s| s.code.as_deref())
                .find_map(|c| c.strip_prefix("PowerState/"))
        })
        .unwrap_or("stopped")
        .to_lowercase()
}

/// Whether the VM is shut down: stopped, deallocating or deallocated (not stopping).
pub(crate) fn is_shut_down(vm: &VirtualMachine) -> bool {
    matches!(
        power_state(vm).as_str(),
        "stopped" | "deallocated" | "deallocating"
    )
}

/// The VM's zone: `<location>-<zone>` for a zonal VM, else its fault domain.
pub(crate) fn zone_of(vm: &VirtualMachine, default_location: &str) -> Zone {
    let location = vm
        .location
        .as_deref()
        .unwrap_or(default_location)
        .to_lowercase();
    let failure_domain = match vm.zones.first() {
        Some(z) => format!("{location}-{z}"),
        None => vm
            .properties
            .instance_view
            .as_ref()
            .and_then(|v| v.platform_fault_domain)
            .unwrap_or(0)
            .to_string(),
    };
    Zone {
        failure_domain,
        region: location,
    }
}

/// The VM size.
pub(crate) fn instance_type(vm: &VirtualMachine) -> String {
    vm.properties
        .hardware_profile
        .as_ref()
        .and_then(|h| h.vm_size.clone())
        .unwrap_or_default()
}

/// The primary NIC's ID: the only one, or the one marked primary.
pub(crate) fn primary_nic_id(vm: &VirtualMachine) -> Option<String> {
    let nics = &vm.properties.network_profile.as_ref()?.network_interfaces;
    let primary = if nics.len() == 1 {
        nics.first()
    } else {
        nics.iter().find(|n| {
            n.properties
                .as_ref()
                .and_then(|p| p.primary)
                .unwrap_or(false)
        })
    };
    primary.and_then(|n| n.id.clone())
}

/// A NIC's primary IP configuration: the only one, or the one marked primary.
pub(crate) fn primary_ip_configuration(nic: &NetworkInterface) -> Option<&IpConfiguration> {
    let configs = &nic.properties.ip_configurations;
    if configs.len() == 1 {
        configs.first()
    } else {
        configs
            .iter()
            .find(|c| c.properties.primary.unwrap_or(false))
    }
}

fn address(kind: &str, value: String) -> NodeAddress {
    NodeAddress {
        type_: kind.into(),
        address: value,
    }
}

impl Azure {
    /// The instance document of the VM this process runs on when it is node `name` (only with
    /// `useInstanceMetadata`; upstream's `isCurrentInstance` compares the lower-cased name).
    async fn local_instance(&self, name: &str) -> Result<Option<crate::metadata::Instance>> {
        let Some(imds) = &self.imds else {
            return Ok(None);
        };
        let i = imds.instance().await?;
        Ok((i.compute.name.to_lowercase() == name).then_some(i))
    }

    /// The VM named `name` in `group` with its instance view; `None` when it does not exist.
    pub(crate) async fn vm(&self, group: &str, name: &str) -> Result<Option<VirtualMachine>> {
        let arm = self.arm().await?;
        let id = arm.resource_id(group, "Microsoft.Compute/virtualMachines", name);
        match arm
            .get_with::<VirtualMachine>(&id, &[("$expand", "instanceView")])
            .await
        {
            Ok(vm) => Ok(Some(vm)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The VM of node `name` (in the config's resource group).
    async fn vm_of_node(&self, name: &str) -> Result<Option<VirtualMachine>> {
        self.vm(&self.config.resource_group, name).await
    }

    /// The VM a provider ID names.
    async fn vm_of_provider_id(&self, id: &str) -> Result<Option<VirtualMachine>> {
        let (group, name) = parse_provider_id(id)?;
        self.vm(&group, &name).await
    }

    /// The VM of a Node: by its provider ID when it has one, else by its name.
    async fn vm_of(&self, node: &Node) -> Result<Option<VirtualMachine>> {
        match node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|p| !p.is_empty())
        {
            Some(id) => self.vm_of_provider_id(id).await,
            None => {
                self.vm_of_node(node.metadata.name.as_deref().unwrap_or_default())
                    .await
            }
        }
    }

    fn id_of(&self, vm: &VirtualMachine) -> Result<String> {
        let id = vm.id.as_deref().ok_or_else(|| Error::Missing {
            what: "virtual machine".into(),
            message: "ARM answered a VM without an id".into(),
        })?;
        // The resource ID with its group lower-cased.
        let (group, name) = parse_provider_id(&format!("{PROVIDER_ID_PREFIX}{id}"))?;
        let subscription = id
            .trim_start_matches('/')
            .split('/')
            .nth(1)
            .unwrap_or_default();
        Ok(provider_id(subscription, &group, &name))
    }

    /// The node's addresses: InternalIP, Hostname, then ExternalIP, as upstream's
    /// `GetIPByNodeName` orders them.
    async fn addresses_of(&self, node_name: &str, vm: &VirtualMachine) -> Result<Vec<NodeAddress>> {
        let arm = self.arm().await?;
        let nic_id = primary_nic_id(vm).ok_or_else(|| Error::Missing {
            what: format!("virtual machine {node_name}"),
            message: "it has no primary network interface".into(),
        })?;
        let nic: NetworkInterface = arm.get(&nic_id).await?;
        let config = primary_ip_configuration(&nic).ok_or_else(|| Error::Missing {
            what: format!("network interface {nic_id}"),
            message: "it has no primary IP configuration".into(),
        })?;
        let mut out = Vec::new();
        if let Some(ip) = &config.properties.private_ip_address {
            out.push(address("InternalIP", ip.clone()));
        }
        out.push(address("Hostname", node_name.to_owned()));
        if let Some(pip_id) = config
            .properties
            .public_ip_address
            .as_ref()
            .and_then(|r| r.id.as_deref())
        {
            match arm.get::<PublicIpAddress>(pip_id).await {
                Ok(pip) => {
                    if let Some(ip) = pip.properties.ip_address {
                        out.push(address("ExternalIP", ip));
                    }
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    fn name_of(vm: &VirtualMachine) -> String {
        vm.name.clone().unwrap_or_default()
    }
}

fn not_found() -> hypercloud_cloudprovider::Error {
    hypercloud_cloudprovider::Error::InstanceNotFound
}

#[async_trait]
impl Instances for Azure {
    async fn node_addresses(
        &self,
        name: &str,
    ) -> hypercloud_cloudprovider::Result<Vec<NodeAddress>> {
        if let Some(i) = self
            .local_instance(name)
            .await
            .map_err(Error::into_provider_error)?
        {
            // Upstream's getLocalInstanceNodeAddresses: Hostname, InternalIP, ExternalIP.
            let (private, public) = i.addresses();
            let mut out = vec![address("Hostname", name.to_owned())];
            out.extend(private.map(|ip| address("InternalIP", ip)));
            out.extend(public.map(|ip| address("ExternalIP", ip)));
            return Ok(out);
        }
        let vm = self
            .vm_of_node(name)
            .await
            .map_err(Error::into_provider_error)?
            .ok_or_else(not_found)?;
        self.addresses_of(name, &vm)
            .await
            .map_err(Error::into_provider_error)
    }

    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<Vec<NodeAddress>> {
        let vm = self
            .vm_of_provider_id(provider_id)
            .await
            .map_err(Error::into_provider_error)?
            .ok_or_else(not_found)?;
        self.addresses_of(&Self::name_of(&vm), &vm)
            .await
            .map_err(Error::into_provider_error)
    }

    /// The VM's resource ID (without the `azure://` scheme), as upstream's `InstanceID`.
    async fn instance_id(&self, name: &str) -> hypercloud_cloudprovider::Result<String> {
        if let Some(i) = self
            .local_instance(name)
            .await
            .map_err(Error::into_provider_error)?
        {
            // Upstream's getLocalInstanceProviderID: the subscription and group lower-cased,
            // the node's name.
            let id = provider_id(
                &i.compute.subscription_id.to_lowercase(),
                &i.compute.resource_group_name,
                name,
            );
            return Ok(id.trim_start_matches(PROVIDER_ID_PREFIX).to_owned());
        }
        let vm = self
            .vm_of_node(name)
            .await
            .map_err(Error::into_provider_error)?
            .ok_or_else(not_found)?;
        let id = self.id_of(&vm).map_err(Error::into_provider_error)?;
        Ok(id.trim_start_matches(PROVIDER_ID_PREFIX).to_owned())
    }

    async fn instance_type(&self, name: &str) -> hypercloud_cloudprovider::Result<String> {
        if let Some(i) = self
            .local_instance(name)
            .await
            .map_err(Error::into_provider_error)?
            .filter(|i| !i.compute.vm_size.is_empty())
        {
            return Ok(i.compute.vm_size);
        }
        let vm = self
            .vm_of_node(name)
            .await
            .map_err(Error::into_provider_error)?
            .ok_or_else(not_found)?;
        Ok(instance_type(&vm))
    }

    async fn instance_type_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<String> {
        let vm = self
            .vm_of_provider_id(provider_id)
            .await
            .map_err(Error::into_provider_error)?
            .ok_or_else(not_found)?;
        Ok(instance_type(&vm))
    }

    /// Not implemented upstream either.
    async fn add_ssh_key_to_all_instances(
        &self,
        _user: &str,
        _key: &[u8],
    ) -> hypercloud_cloudprovider::Result<()> {
        Err(hypercloud_cloudprovider::Error::NotImplemented)
    }

    /// The hostname, as upstream.
    async fn current_node_name(&self, hostname: &str) -> hypercloud_cloudprovider::Result<String> {
        Ok(hostname.to_owned())
    }

    async fn instance_exists_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<bool> {
        self.vm_of_provider_id(provider_id)
            .await
            .map(|vm| vm.is_some())
            .map_err(Error::into_provider_error)
    }

    async fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<bool> {
        self.vm_of_provider_id(provider_id)
            .await
            .map(|vm| vm.as_ref().is_some_and(is_shut_down))
            .map_err(Error::into_provider_error)
    }
}

#[async_trait]
impl InstancesV2 for Azure {
    async fn instance_exists(&self, node: &Node) -> hypercloud_cloudprovider::Result<bool> {
        self.vm_of(node)
            .await
            .map(|vm| vm.is_some())
            .map_err(Error::into_provider_error)
    }

    async fn instance_shutdown(&self, node: &Node) -> hypercloud_cloudprovider::Result<bool> {
        self.vm_of(node)
            .await
            .map(|vm| vm.as_ref().is_some_and(is_shut_down))
            .map_err(Error::into_provider_error)
    }

    async fn instance_metadata(
        &self,
        node: &Node,
    ) -> hypercloud_cloudprovider::Result<InstanceMetadata> {
        let vm = self
            .vm_of(node)
            .await
            .map_err(Error::into_provider_error)?
            .ok_or_else(not_found)?;
        let name = node
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| Self::name_of(&vm));
        let zone = zone_of(&vm, &self.config.location);
        Ok(InstanceMetadata {
            provider_id: self.id_of(&vm).map_err(Error::into_provider_error)?,
            instance_type: instance_type(&vm),
            node_addresses: self
                .addresses_of(&name, &vm)
                .await
                .map_err(Error::into_provider_error)?,
            zone: zone.failure_domain,
            region: zone.region,
            additional_labels: Default::default(),
        })
    }
}

#[async_trait]
impl Zones for Azure {
    /// The zone of the VM this process runs on: from the instance metadata service with
    /// `useInstanceMetadata` (`<location>-<zone>`, else the fault domain), else found by the
    /// hostname, as upstream.
    async fn get_zone(&self) -> hypercloud_cloudprovider::Result<Zone> {
        if let Some(imds) = &self.imds {
            let i = imds.instance().await.map_err(Error::into_provider_error)?;
            return Ok(imds_zone(&i.compute));
        }
        let host = hostname().map_err(Error::into_provider_error)?;
        self.get_zone_by_node_name(&host).await
    }

    async fn get_zone_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<Zone> {
        let vm = self
            .vm_of_provider_id(provider_id)
            .await
            .map_err(Error::into_provider_error)?
            .ok_or_else(not_found)?;
        Ok(zone_of(&vm, &self.config.location))
    }

    /// The zone of node `name`: from the instance metadata service when `name` is the VM
    /// this process runs on (as [`Zones::get_zone`], which upstream's kubelet and
    /// cloud-node-manager call), else from Resource Manager.
    async fn get_zone_by_node_name(&self, name: &str) -> hypercloud_cloudprovider::Result<Zone> {
        if let Some(i) = self
            .local_instance(name)
            .await
            .map_err(Error::into_provider_error)?
        {
            return Ok(imds_zone(&i.compute));
        }
        let vm = self
            .vm_of_node(name)
            .await
            .map_err(Error::into_provider_error)?
            .ok_or_else(not_found)?;
        Ok(zone_of(&vm, &self.config.location))
    }
}

/// The zone the instance metadata service gives: `<location>-<zone>`, else the fault domain.
fn imds_zone(c: &crate::metadata::Compute) -> Zone {
    let location = c.location.to_lowercase();
    let failure_domain = if c.zone.is_empty() {
        c.platform_fault_domain.clone()
    } else {
        format!("{location}-{}", c.zone)
    };
    Zone {
        failure_domain,
        region: location,
    }
}

/// This machine's hostname, lower-cased (upstream's `os.Hostname`).
fn hostname() -> Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map_err(|e| Error::Missing {
            what: "hostname".into(),
            message: e.to_string(),
        })?;
    Ok(name.trim().to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vm(v: serde_json::Value) -> VirtualMachine {
        serde_json::from_value(v).expect("a VM")
    }

    #[test]
    fn provider_ids_round_trip_with_the_group_lower_cased() {
        let id = provider_id("sub", "My-RG", "node-1");
        assert_eq!(
            id,
            "azure:///subscriptions/sub/resourceGroups/my-rg/providers/Microsoft.Compute/virtualMachines/node-1"
        );
        assert_eq!(
            parse_provider_id(&id).expect("parsed"),
            ("my-rg".into(), "node-1".into())
        );
        for bad in [
            "aws:///x",
            "azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v",
            "azure:///subscriptions/s/resourceGroups//providers/Microsoft.Compute/virtualMachines/n",
            "azure://",
        ] {
            assert!(parse_provider_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn zones_power_states_and_primary_nics_as_upstream() {
        let zonal = vm(json!({"location": "WestEurope", "zones": ["2"], "properties": {}}));
        assert_eq!(zone_of(&zonal, "x").failure_domain, "westeurope-2");
        assert_eq!(zone_of(&zonal, "x").region, "westeurope");
        let fd = vm(
            json!({"location": "regionone", "properties": {"instanceView": {"platformFaultDomain": 1, "statuses": [{"code": "PowerState/deallocating"}]}}}),
        );
        assert_eq!(zone_of(&fd, "x").failure_domain, "1");
        assert!(is_shut_down(&fd));
        let running = vm(
            json!({"properties": {"instanceView": {"statuses": [{"code": "ProvisioningState/succeeded"}, {"code": "PowerState/running"}]}}}),
        );
        assert!(!is_shut_down(&running));
        let stopping = vm(
            json!({"properties": {"instanceView": {"statuses": [{"code": "PowerState/stopping"}]}}}),
        );
        assert!(!is_shut_down(&stopping));
        assert!(
            is_shut_down(&vm(json!({"properties": {}}))),
            "no instance view reads as stopped"
        );
        let two = vm(
            json!({"properties": {"networkProfile": {"networkInterfaces": [
            {"id": "a"}, {"id": "b", "properties": {"primary": true}}]}}}),
        );
        assert_eq!(primary_nic_id(&two).as_deref(), Some("b"));
    }
}
