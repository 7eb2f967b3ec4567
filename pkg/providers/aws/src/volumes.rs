//! EBS volumes: which zone and region a volume is in, for the PersistentVolumeLabel admission
//! webhook (in-tree) and the cloud-controller-manager's PV labelling (external): the
//! [`PvLabeler`] capability. Upstream equivalent: legacy `aws.go` `GetLabelsForVolume` and
//! `KubernetesVolumeID.MapToAWSVolumeID`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{Error, PvLabeler, Result};
use k8s_openapi::api::core::v1::PersistentVolume;

use aws_sdk_ec2::types::Volume;

use crate::error::{absent, cloud, sdk};
use crate::Aws;

/// The EBS CSI driver's name.
pub const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";
/// The volume ID of PVs still being provisioned (upstream `ProvisionedVolumeName`).
const PROVISIONING_PLACEHOLDER: &str = "placeholder-for-provisioning";

/// A PV's EBS volume reference: in-tree `awsElasticBlockStore` or the EBS CSI driver's handle.
fn ebs_volume_ref(pv: &PersistentVolume) -> Option<&str> {
    let spec = pv.spec.as_ref()?;
    if let Some(ebs) = &spec.aws_elastic_block_store {
        return Some(ebs.volume_id.as_str());
    }
    spec.csi
        .as_ref()
        .filter(|c| c.driver == EBS_CSI_DRIVER)
        .map(|c| c.volume_handle.as_str())
}

/// `aws://<zone>/vol-...`, `aws:///vol-...` or `vol-...` → `vol-...`.
pub(crate) fn parse_volume_id(reference: &str) -> Result<&str> {
    let id = match reference.strip_prefix("aws://") {
        Some(rest) => rest
            .trim_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default(),
        None => reference,
    };
    if !id.starts_with("vol-") || id.contains(char::is_whitespace) {
        return Err(cloud(
            "parse volume ID",
            format!("{reference:?} is not an EBS volume ID (vol-... or aws://<zone>/vol-...)"),
        ));
    }
    Ok(id)
}

impl Aws {
    /// The volume `id` (`vol-...`) as EC2 describes it; `None` when EC2 does not know it.
    /// Every EBS look-up (labels, provisioning, attaching) goes through here.
    pub(crate) async fn describe_volume(&self, id: &str) -> Result<Option<Volume>> {
        let s = self.session().await?;
        let reply = s
            .ec2
            .describe_volumes()
            .volume_ids(id)
            .send()
            .await
            .map_err(|e| sdk("DescribeVolumes", e));
        let Some(reply) = absent(reply, &["InvalidVolume.NotFound"])? else {
            return Ok(None);
        };
        Ok(reply
            .volumes()
            .iter()
            .find(|v| v.volume_id() == Some(id))
            .cloned())
    }
}

#[async_trait]
impl PvLabeler for Aws {
    /// As upstream: nothing for PVs that are not EBS volumes or are still provisioning; else
    /// the volume's zone and the region; [`Error::DiskNotFound`] for a volume EC2 lacks.
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<BTreeMap<String, String>> {
        let mut labels = BTreeMap::new();
        let Some(reference) = ebs_volume_ref(pv) else {
            return Ok(labels);
        };
        if reference == PROVISIONING_PLACEHOLDER {
            return Ok(labels);
        }
        let id = parse_volume_id(reference)?;
        let vol = self.describe_volume(id).await?.ok_or(Error::DiskNotFound)?;
        let zone = vol.availability_zone().unwrap_or_default();
        if zone.is_empty() {
            return Err(cloud(
                "DescribeVolumes",
                format!("volume {id} has no availability zone"),
            ));
        }
        labels.insert(LABEL_TOPOLOGY_ZONE.to_owned(), zone.to_owned());
        let region = self.session().await?.region.clone();
        labels.insert(LABEL_TOPOLOGY_REGION.to_owned(), region);
        Ok(labels)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn volume_ids_as_upstream() {
        assert_eq!(parse_volume_id("vol-123").unwrap(), "vol-123");
        assert_eq!(
            parse_volume_id("aws://us-east-1a/vol-123").unwrap(),
            "vol-123"
        );
        assert_eq!(parse_volume_id("aws:///vol-123").unwrap(), "vol-123");
        for bad in ["", "aws://us-east-1a/", "disk-1", "aws://x/i-1"] {
            assert!(parse_volume_id(bad).is_err(), "{bad}");
        }
    }
}
