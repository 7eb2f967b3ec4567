//! Cinder volumes for the node side of storage: which zone and region a volume is in, for the
//! PersistentVolumeLabel admission webhook and PV labelling. Upstream equivalent: the legacy
//! in-tree provider's `GetLabelsForVolume` (`openstack_volumes.go`).

use async_trait::async_trait;
use hypercloud_cloudprovider::{Error, Result, Zone};
use reqwest::Method;

use crate::client::{is_not_found, Service};
use crate::OpenStack;

/// Volume look-ups a provider may offer besides the upstream interface.
#[async_trait]
pub trait Volumes: Send + Sync {
    /// The availability zone and region of a volume; [`Error::DiskNotFound`] when it does not
    /// exist.
    async fn volume_zone(&self, volume_id: &str) -> Result<Zone>;
}

#[async_trait]
impl Volumes for OpenStack {
    async fn volume_zone(&self, volume_id: &str) -> Result<Zone> {
        let reply = self
            .client
            .request(
                Service::Volume,
                Method::GET,
                &format!("/volumes/{volume_id}"),
                None,
                "get volume",
            )
            .await;
        let body = match reply {
            Ok(r) => r.body,
            Err(e) if is_not_found(&e) => return Err(Error::DiskNotFound),
            Err(e) => return Err(e),
        };
        let zone = body["volume"]["availability_zone"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok(Zone {
            failure_domain: zone,
            region: self.client.region().to_owned(),
        })
    }
}
