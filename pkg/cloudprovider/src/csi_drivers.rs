//! Which CSI driver stands in for which in-tree volume plugin: the one table that says so
//! (upstream: `k8s.io/csi-translation-lib`'s plugins, which kube-controller-manager and the
//! kubelet use for CSI migration, and the drivers' own names and topology keys). The
//! provisioner reads it for the claims a CSI-migrated binder annotates with the driver, the
//! `csi-driver` personality for its name, and the kubelet-helper for the migrated-plugins
//! annotation.

/// One in-tree plugin and the CSI driver that took its volumes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    /// The in-tree plugin (`kubernetes.io/cinder`), as the provider's volume capability
    /// names it; also the value in `CSINode`'s `storage.alpha.kubernetes.io/migrated-plugins`.
    pub in_tree_plugin: &'static str,
    /// The CSI driver's name (`GetPluginInfo`, `CSIDriver`, `CSINode`, the PVs' `csi.driver`).
    pub driver: &'static str,
    /// The topology key of the driver's zone segment (what CSI migration translates the
    /// in-tree PVs' `topology.kubernetes.io/zone` affinity into).
    pub topology_key: &'static str,
    /// The most volumes one node attaches (`NodeGetInfo.max_volumes_per_node`), as the
    /// upstream driver reports it by default.
    pub max_volumes_per_node: i64,
    /// The largest volume the driver asks the cloud for, in GiB: a larger request is refused
    /// with `OutOfRange` before the cloud is asked.
    pub max_volume_gib: u64,
    /// Whether the driver grows volumes (`EXPAND_VOLUME`, offline): not where the in-tree
    /// plugin could not (vsphere-volume of Kubernetes v1.20 had no expansion, and the
    /// provider refuses it).
    pub expands: bool,
}

/// Every driver this binary can play, keyed by the in-tree plugin.
pub const DRIVERS: &[DriverInfo] = &[
    DriverInfo {
        in_tree_plugin: "kubernetes.io/cinder",
        driver: "cinder.csi.openstack.org",
        topology_key: "topology.cinder.csi.openstack.org/zone",
        max_volumes_per_node: 256,
        // Cinder sets no size limit of its own; its default per-project quota is 1000 GiB.
        max_volume_gib: 1000,
        expands: true,
    },
    DriverInfo {
        in_tree_plugin: "kubernetes.io/aws-ebs",
        driver: "ebs.csi.aws.com",
        topology_key: "topology.ebs.csi.aws.com/zone",
        max_volumes_per_node: 39,
        // gp2/gp3/io1/st1/sc1 volumes are at most 16 TiB.
        max_volume_gib: 16_384,
        expands: true,
    },
    DriverInfo {
        in_tree_plugin: "kubernetes.io/gce-pd",
        driver: "pd.csi.storage.gke.io",
        topology_key: "topology.gke.io/zone",
        max_volumes_per_node: 127,
        // A zonal persistent disk is at most 64 TiB.
        max_volume_gib: 65_536,
        expands: true,
    },
    DriverInfo {
        in_tree_plugin: "kubernetes.io/azure-disk",
        driver: "disk.csi.azure.com",
        topology_key: "topology.disk.csi.azure.com/zone",
        // The driver's default when the VM size gives none.
        max_volumes_per_node: 16,
        // A managed disk is at most 32 TiB (32767 GiB).
        max_volume_gib: 32_767,
        expands: true,
    },
    DriverInfo {
        in_tree_plugin: "kubernetes.io/vsphere-volume",
        driver: "csi.vsphere.vmware.com",
        // The vSphere CSI driver's improved topology uses the well-known labels.
        topology_key: "topology.kubernetes.io/zone",
        max_volumes_per_node: 59,
        // A VMDK is at most 62 TiB.
        max_volume_gib: 63_488,
        expands: false,
    },
];

/// The driver for an in-tree plugin.
pub fn for_plugin(plugin: &str) -> Option<&'static DriverInfo> {
    DRIVERS.iter().find(|d| d.in_tree_plugin == plugin)
}

/// The driver of that name.
pub fn for_driver(name: &str) -> Option<&'static DriverInfo> {
    DRIVERS.iter().find(|d| d.driver == name)
}

/// The name of the device a volume attached to an instance gets in the guest's
/// `/dev/disk/by-id/`, as the cloud's guests name it: virtio disks are
/// `virtio-<first 20 characters of the serial>` (Nova sets the serial to the volume ID).
/// `None` where the guest names it by something the volume ID does not give.
pub fn by_id_name(driver: &DriverInfo, volume_id: &str) -> Option<String> {
    match driver.driver {
        "cinder.csi.openstack.org" => Some(format!(
            "virtio-{}",
            volume_id.chars().take(20).collect::<String>()
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_driver_is_found_by_its_plugin_and_names_are_unique() {
        for d in DRIVERS {
            assert_eq!(for_plugin(d.in_tree_plugin), Some(d));
            assert_eq!(DRIVERS.iter().filter(|o| o.driver == d.driver).count(), 1);
        }
        assert!(for_plugin("kubernetes.io/nfs").is_none());
    }

    #[test]
    fn virtio_names_cut_the_serial_at_20() {
        let cinder = for_plugin("kubernetes.io/cinder").expect("cinder");
        assert_eq!(
            by_id_name(cinder, "0123456789abcdef0123456789").as_deref(),
            Some("virtio-0123456789abcdef0123")
        );
        let ebs = for_plugin("kubernetes.io/aws-ebs").expect("ebs");
        assert_eq!(by_id_name(ebs, "vol-1"), None);
    }
}
