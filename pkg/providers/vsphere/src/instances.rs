//! vSphere VMs as Kubernetes nodes: Instances (v1), InstancesV2 and Zones.
//!
//! Provider IDs are `vsphere://<config.uuid>`. A node is found by its provider ID, its
//! SMBIOS UUID (`status.nodeInfo.systemUUID`, either byte order), or its name (VM name, guest
//! DNS name or IP). Addresses come from `guest.net` as cloud-provider-vsphere chooses them;
//! the instance type from the VM hardware (`vsphere-vm.cpu-N.mem-Mgb.os-OS`); zones and
//! regions from tags in the `[Labels]` categories on the host's ancestry. In the kubelet
//! (in-tree), the node's own VM is found by the UUID in `product_uuid` first. With several
//! vCenters, each is searched in config order (the one that had the VM last time first) and
//! the VM's zone, addresses and power state come from the vCenter that has it; upstream's
//! NodeManager (`DiscoverNode`) searches every vCenter the same way.
//! Upstream equivalents: cloud-provider-vsphere `instances.go`, `instances_v2.go`,
//! `nodemanager.go` (`DiscoverNode`), `zones.go`; legacy `vsphere.go` (`NodeAddresses`,
//! `GetZone`).

use hypercloud_cloudprovider::ProviderError as _;
use std::net::IpAddr;

use async_trait::async_trait;
use hypercloud_cloudprovider::{
    Error as CloudError, InstanceMetadata, Instances, InstancesV2, Result, Zone, Zones,
};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::config::{Config, IpFamily};
use crate::inventory::{Found, Inventory, Key, Vm};
use crate::VSphere;

/// The provider ID scheme.
pub const PROVIDER_ID_PREFIX: &str = "vsphere://";

/// `vsphere://<uuid>` (also `vsphere:///<uuid>`) → the UUID.
pub fn parse_provider_id(provider_id: &str) -> Result<&str> {
    provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .map(|s| s.trim_start_matches('/'))
        .filter(|s| !s.is_empty() && !s.contains('/'))
        .ok_or_else(|| {
            crate::cloud_error(
                "parse provider ID",
                format!("{provider_id:?} is not a vSphere provider ID (vsphere://<uuid>)"),
            )
        })
}

/// The provider ID of a VM.
pub fn provider_id(uuid: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{uuid}")
}

/// Guest OS families as the instance type names them (upstream `GuestOSLookup`, by prefix).
fn os_family(guest_id: &str) -> &'static str {
    const FAMILIES: [(&str, &str); 12] = [
        ("ubuntu", "ubuntu"),
        ("centos", "centos"),
        ("rhel", "rhel"),
        ("oracleLinux", "oracle"),
        ("debian", "debian"),
        ("sles", "sles"),
        ("vmwarePhoton", "photon"),
        ("coreos", "coreos"),
        ("fedora", "fedora"),
        ("windows", "windows"),
        ("otherLinux", "linux"),
        ("other", "other"),
    ];
    FAMILIES
        .iter()
        .find(|(prefix, _)| guest_id.starts_with(prefix))
        .map(|(_, os)| *os)
        .unwrap_or("unknown")
}

/// `vsphere-vm.cpu-<n>.mem-<GiB>gb.os-<family>`, as cloud-provider-vsphere.
pub(crate) fn instance_type(vm: &Vm) -> String {
    format!(
        "vsphere-vm.cpu-{}.mem-{}gb.os-{}",
        vm.num_cpu,
        vm.memory_mb / 1024,
        os_family(&vm.guest_id)
    )
}

fn usable(ip: &IpAddr) -> bool {
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    !(ip.is_loopback() || ip.is_unspecified() || link_local)
}

/// The Node's addresses from `guest.net`, as cloud-provider-vsphere's `DiscoverNode` picks
/// them: the guest host name; then per IP family in `ip-family` order, the InternalIP and
/// ExternalIP chosen by subnet (`*-network-subnet-cidr`), else by port group
/// (`*-vm-network-name`), else the first address of the family as both. NICs that are not
/// the VM's virtual NICs (`deviceConfigId` -1), loopback and link-local addresses and the
/// `exclude-*` subnets never count.
pub(crate) fn node_addresses(
    vm: &Vm,
    cfg: &Config,
) -> std::result::Result<Vec<NodeAddress>, String> {
    let n = &cfg.nodes;
    let mut out: Vec<NodeAddress> = Vec::new();
    let push = |out: &mut Vec<NodeAddress>, kind: &str, addr: String| {
        if !out.iter().any(|a| a.type_ == kind && a.address == addr) {
            out.push(NodeAddress {
                type_: kind.into(),
                address: addr,
            });
        }
    };
    if !vm.hostname.is_empty() {
        push(&mut out, "Hostname", vm.hostname.clone());
    }
    let candidates: Vec<(IpAddr, String)> = vm
        .nics
        .iter()
        .filter(|nic| nic.device_config_id != Some(-1))
        .flat_map(|nic| {
            let net = nic.network.clone().unwrap_or_default();
            nic.ip_address
                .iter()
                .filter_map(move |s| s.parse::<IpAddr>().ok().map(|ip| (ip, net.clone())))
        })
        .filter(|(ip, _)| usable(ip))
        .collect();
    let same_net = |want: &Option<String>, net: &str| {
        want.as_deref().is_some_and(|w| w.eq_ignore_ascii_case(net))
    };
    let families = cfg
        .vcenters
        .get(vm.vcenter)
        .map_or(&[IpFamily::V4][..], |vc| &vc.ip_families[..]);
    for family in families {
        let of_family: Vec<&(IpAddr, String)> = candidates
            .iter()
            .filter(|(ip, _)| family.matches(ip))
            .collect();
        let pick = |subnet: &Option<ipnet::IpNet>,
                    network: &Option<String>,
                    exclude: &[ipnet::IpNet]|
         -> Option<IpAddr> {
            let allowed: Vec<&(IpAddr, String)> = of_family
                .iter()
                .copied()
                .filter(|(ip, _)| !exclude.iter().any(|x| x.contains(ip)))
                .collect();
            if let Some(s) = subnet {
                if let Some((ip, _)) = allowed.iter().find(|(ip, _)| s.contains(ip)) {
                    return Some(*ip);
                }
            }
            allowed
                .iter()
                .find(|(_, net)| same_net(network, net))
                .map(|(ip, _)| *ip)
        };
        let mut internal = pick(&n.internal_subnet, &n.internal_network, &n.exclude_internal);
        let mut external = pick(&n.external_subnet, &n.external_network, &n.exclude_external);
        if internal.is_none() && external.is_none() {
            // No selection matched: the first address of the family is both, as upstream
            // (unless excluded for that role).
            internal = of_family
                .iter()
                .map(|(ip, _)| *ip)
                .find(|ip| !n.exclude_internal.iter().any(|x| x.contains(ip)));
            external = of_family
                .iter()
                .map(|(ip, _)| *ip)
                .find(|ip| !n.exclude_external.iter().any(|x| x.contains(ip)));
        }
        if let Some(ip) = internal {
            push(&mut out, "InternalIP", ip.to_string());
        }
        if let Some(ip) = external {
            push(&mut out, "ExternalIP", ip.to_string());
        }
        if !vm.nics.is_empty() && internal.is_none() && external.is_none() {
            let fam = match family {
                IpFamily::V4 => "ipv4",
                IpFamily::V6 => "ipv6",
            };
            return Err(format!(
                "unable to find a suitable IP address for VM {:?} with IP family {fam}",
                vm.name
            ));
        }
    }
    Ok(out)
}

impl VSphere {
    /// The inventory of the vCenter that has `vm`.
    pub(crate) fn inventory_of(&self, vm: &Vm) -> &Inventory {
        &self.vcenters[vm.vcenter]
    }

    /// The VM for `key` in whichever vCenter has it: each vCenter's current listing in turn
    /// (the vCenter that had it last time first, then config order), then a new listing of
    /// each whose listing was older than this call. A vCenter that fails is skipped; its
    /// error is returned only when no other vCenter has the VM (as upstream's `DiscoverNode`),
    /// so an unreachable vCenter never makes a VM "not found".
    pub(crate) async fn locate(&self, key: Key<'_>) -> Result<Option<Vm>> {
        let hint_key = match key {
            Key::Uuid(u) => format!("uuid:{}", u.to_lowercase()),
            Key::Name(n) => format!("name:{n}"),
        };
        let hint = self
            .located
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&hint_key)
            .copied();
        let order: Vec<&Inventory> = hint
            .and_then(|i| self.vcenters.get(i))
            .into_iter()
            .chain(self.vcenters.iter().filter(|v| Some(v.index) != hint))
            .collect();
        let mut first_error = None;
        let mut stale = Vec::new();
        for force in [false, true] {
            let round = if force {
                std::mem::take(&mut stale)
            } else {
                order.clone()
            };
            for inv in round {
                match inv.find_listed(key, force).await {
                    Ok(Found::Vm(vm)) => {
                        if self.vcenters.len() > 1 {
                            self.located
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .insert(hint_key, inv.index);
                        }
                        return Ok(Some(*vm));
                    }
                    Ok(Found::Absent) => {}
                    Ok(Found::NotInCachedListing) => stale.push(inv),
                    Err(e) => {
                        let e = self.naming_vcenter(inv, e);
                        if self.vcenters.len() > 1 {
                            tracing::warn!(error = %hypercloud_cloudprovider::Chain(&e), "looking for a VM in one of the vCenters failed; trying the others");
                        }
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(None),
        }
    }

    /// The VM for `key`; [`CloudError::InstanceNotFound`] when no vCenter has one.
    async fn vm(&self, key: Key<'_>) -> Result<Vm> {
        self.locate(key).await?.ok_or(CloudError::InstanceNotFound)
    }

    /// The VM of a node by name: this machine's own VM by its SMBIOS UUID when the name is
    /// the one the kubelet registered under ([`Instances::current_node_name`]), else by name.
    async fn vm_by_node_name(&self, name: &str) -> Result<Vm> {
        if let Some(local) = self.local.get() {
            if local.node_name == name {
                return self.vm(Key::Uuid(&local.uuid)).await.map_err(|e| match e {
                    CloudError::InstanceNotFound => crate::cloud_error(
                        "FindByUuid",
                        format!(
                            "no VM in vCenter has this machine's UUID {} (read from {})",
                            local.uuid, local.source
                        ),
                    ),
                    other => other,
                });
            }
        }
        self.vm(Key::Name(name)).await
    }

    async fn vm_by_provider_id(&self, provider_id: &str) -> Result<Vm> {
        self.vm(Key::Uuid(parse_provider_id(provider_id)?)).await
    }

    /// The VM of a Node: provider ID, else system UUID, else name.
    async fn vm_of_node(&self, node: &Node) -> Result<Option<Vm>> {
        let spec_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|s| !s.is_empty());
        let found = if let Some(id) = spec_id {
            self.locate(Key::Uuid(parse_provider_id(id)?)).await?
        } else {
            let system_uuid = node
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.system_uuid.as_str())
                .filter(|s| !s.is_empty());
            let by_uuid = match system_uuid {
                Some(u) => self.locate(Key::Uuid(u)).await?,
                None => None,
            };
            match by_uuid {
                Some(vm) => Some(vm),
                None => {
                    let name = node.metadata.name.as_deref().unwrap_or_default();
                    match self.vm_by_node_name(name).await {
                        Ok(vm) => Some(vm),
                        Err(CloudError::InstanceNotFound) => None,
                        Err(e) => return Err(e),
                    }
                }
            }
        };
        Ok(found)
    }

    fn addresses(&self, vm: &Vm) -> Result<Vec<NodeAddress>> {
        node_addresses(vm, &self.config)
            .map_err(|message| crate::cloud_error("node addresses", message))
    }

    /// Zone and region of a VM from the tags on its host's ancestry: for each configured
    /// category, the nearest object with a tag of that category names it.
    pub(crate) async fn zone_of(&self, vm: &Vm) -> Result<Zone> {
        let labels = &self.config.labels;
        if labels.zone.is_none() && labels.region.is_none() {
            return Ok(Zone::default());
        }
        let host = vm.host.as_deref().ok_or_else(|| {
            crate::cloud_error(
                "zone",
                format!("VM {:?} has no host (runtime.host)", vm.name),
            )
        })?;
        let inv = self.inventory_of(vm);
        let chain = inv
            .ancestry(host)
            .await
            .map_err(|e| self.naming_vcenter(inv, e))?;
        self.zone_of_objects(inv, &chain, &vm.name).await
    }

    /// The zone and region tags nearest the start of `chain` (objects of `inv`'s vCenter).
    pub(crate) async fn zone_of_objects(
        &self,
        inv: &Inventory,
        chain: &[crate::soap::Moref],
        what: &str,
    ) -> Result<Zone> {
        let labels = &self.config.labels;
        let tags = inv
            .tags_of(chain)
            .await
            .map_err(|e| self.naming_vcenter(inv, e))?;
        let nearest = |category: &Option<String>| -> Option<String> {
            let category = category.as_deref()?;
            chain.iter().find_map(|o| {
                tags.get(&o.value)?
                    .iter()
                    .find(|t| t.category == category)
                    .map(|t| t.name.clone())
            })
        };
        let zone = Zone {
            failure_domain: nearest(&labels.zone).unwrap_or_default(),
            region: nearest(&labels.region).unwrap_or_default(),
        };
        for (category, value, role) in [
            (&labels.zone, &zone.failure_domain, "zone"),
            (&labels.region, &zone.region, "region"),
        ] {
            if let (Some(c), true) = (category, value.is_empty()) {
                return Err(crate::cloud_error(format!("get {role}"),
                    format!(
                        "no tag of {role} category {c:?} on {what} or its host, cluster, folders or datacenter"
                    ),
                ));
            }
        }
        Ok(zone)
    }
}

#[async_trait]
impl Instances for VSphere {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        let vm = self.vm_by_node_name(name).await?;
        self.addresses(&vm)
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        let vm = self.vm_by_provider_id(provider_id).await?;
        self.addresses(&vm)
    }

    /// The VM's UUID (the provider ID is `vsphere://` + this).
    async fn instance_id(&self, name: &str) -> Result<String> {
        Ok(self.vm_by_node_name(name).await?.uuid)
    }

    async fn instance_type(&self, name: &str) -> Result<String> {
        Ok(instance_type(&self.vm_by_node_name(name).await?))
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        Ok(instance_type(&self.vm_by_provider_id(provider_id).await?))
    }

    /// As upstream: not implemented.
    async fn add_ssh_key_to_all_instances(&self, _user: &str, _key: &[u8]) -> Result<()> {
        Err(CloudError::NotImplemented)
    }

    /// The host name, as upstream; this machine's UUID is read now (`vm-uuid`, else the
    /// `product-uuid-file`), so that this node's VM is then found by UUID.
    async fn current_node_name(&self, hostname: &str) -> Result<String> {
        self.remember_local_node(hostname)
            .map_err(crate::Error::into_provider_error)?;
        Ok(hostname.to_string())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        match self.vm_by_provider_id(provider_id).await {
            Ok(_) => Ok(true),
            Err(CloudError::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Anything but `poweredOn` (powered off, suspended) is shut down, as upstream's
    /// `IsActive`.
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        Ok(self.vm_by_provider_id(provider_id).await?.power_state != "poweredOn")
    }
}

#[async_trait]
impl InstancesV2 for VSphere {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        Ok(self.vm_of_node(node).await?.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        let vm = self
            .vm_of_node(node)
            .await?
            .ok_or(CloudError::InstanceNotFound)?;
        Ok(vm.power_state != "poweredOn")
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata> {
        let vm = self
            .vm_of_node(node)
            .await?
            .ok_or(CloudError::InstanceNotFound)?;
        let zone = self.zone_of(&vm).await?;
        Ok(InstanceMetadata {
            provider_id: provider_id(&vm.uuid),
            instance_type: instance_type(&vm),
            node_addresses: self.addresses(&vm)?,
            zone: zone.failure_domain,
            region: zone.region,
            additional_labels: Default::default(),
        })
    }
}

#[async_trait]
impl Zones for VSphere {
    /// This machine's zone: its VM found by its SMBIOS UUID.
    async fn get_zone(&self) -> Result<Zone> {
        let local = self
            .local_uuid()
            .map_err(crate::Error::into_provider_error)?;
        let vm = self.vm(Key::Uuid(&local)).await?;
        self.zone_of(&vm).await
    }

    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        let vm = self.vm_by_provider_id(provider_id).await?;
        self.zone_of(&vm).await
    }

    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone> {
        let vm = self.vm_by_node_name(name).await?;
        self.zone_of(&vm).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soap::GuestNicInfo;

    fn cfg(extra: &str) -> Config {
        Config::parse(
            &format!("[Global]\nuser=u\npassword=p\n[VirtualCenter \"vc\"]\n{extra}"),
            "t",
        )
        .expect("config")
    }

    fn nic(net: &str, ips: &[&str], dev: i32) -> GuestNicInfo {
        GuestNicInfo {
            network: Some(net.into()),
            ip_address: ips.iter().map(|s| (*s).to_owned()).collect(),
            mac_address: None,
            device_config_id: Some(dev),
        }
    }

    fn a(t: &str, ip: &str) -> NodeAddress {
        NodeAddress {
            type_: t.into(),
            address: ip.into(),
        }
    }

    #[test]
    fn first_address_is_internal_and_external_by_default() {
        let vm = Vm {
            name: "n".into(),
            hostname: "node-1".into(),
            nics: vec![
                nic("lo", &["127.0.0.1"], -1),
                nic(
                    "VM Network",
                    &["fe80::1", "10.0.0.5", "2001:db8::5", "10.0.0.6"],
                    4000,
                ),
            ],
            ..Default::default()
        };
        let got = node_addresses(&vm, &cfg("")).expect("addresses");
        assert_eq!(
            got,
            vec![
                a("Hostname", "node-1"),
                a("InternalIP", "10.0.0.5"),
                a("ExternalIP", "10.0.0.5")
            ]
        );
        let got = node_addresses(&vm, &cfg("ip-family = ipv6,ipv4\n")).expect("addresses");
        assert_eq!(got[1], a("InternalIP", "2001:db8::5"));
        assert_eq!(got[3], a("InternalIP", "10.0.0.5"));
    }

    #[test]
    fn subnets_then_network_names_select_roles() {
        let vm = Vm {
            name: "n".into(),
            nics: vec![
                nic("public", &["203.0.113.7"], 4000),
                nic("private", &["10.1.0.7"], 4001),
            ],
            ..Default::default()
        };
        let got = node_addresses(
            &vm,
            &cfg("[Nodes]\ninternal-network-subnet-cidr = 10.1.0.0/16\nexternal-vm-network-name = public\n"),
        )
        .expect("addresses");
        assert_eq!(
            got,
            vec![a("InternalIP", "10.1.0.7"), a("ExternalIP", "203.0.113.7")]
        );
        let got = node_addresses(
            &vm,
            &cfg("[Nodes]\nexclude-internal-network-subnet-cidr = 203.0.113.0/24\n"),
        )
        .expect("addresses");
        assert_eq!(
            got,
            vec![a("InternalIP", "10.1.0.7"), a("ExternalIP", "203.0.113.7")]
        );
        let err = node_addresses(&vm, &cfg("ip-family = ipv6\n")).expect_err("no v6");
        assert!(err.contains("ipv6"), "{err}");
    }

    #[test]
    fn provider_ids_and_instance_types() {
        assert_eq!(
            parse_provider_id("vsphere://4230-ab").expect("id"),
            "4230-ab"
        );
        assert_eq!(
            parse_provider_id("vsphere:///4230-ab").expect("id"),
            "4230-ab"
        );
        assert!(parse_provider_id("openstack:///x").is_err());
        assert!(parse_provider_id("vsphere://").is_err());
        let vm = Vm {
            num_cpu: 4,
            memory_mb: 8192,
            guest_id: "ubuntu64Guest".into(),
            ..Default::default()
        };
        assert_eq!(instance_type(&vm), "vsphere-vm.cpu-4.mem-8gb.os-ubuntu");
        assert_eq!(os_family("otherGuest"), "other");
        assert_eq!(os_family("zzz"), "unknown");
    }
}
