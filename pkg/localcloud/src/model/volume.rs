//! Block Storage v3 (Cinder) records: volumes and their attachments to servers, as stored,
//! with the relation Nova and the config drive read (the volumes attached to a server).
//! Upstream equivalent: `cinder.db.sqlalchemy.models` (`Volume`, `VolumeAttachment`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{impl_record, Meta};
use crate::store::Read;

pub(crate) const VOLUMES: &str = "volumes";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Attachment {
    pub id: String,
    pub server_id: String,
    pub device: String,
    pub attached_at: String,
    /// Nova's device tag (shown from compute 2.70).
    #[serde(default)]
    pub tag: Option<String>,
    /// Whether deleting the server deletes the volume (compute 2.79).
    #[serde(default)]
    pub delete_on_termination: bool,
    /// Being detached: removed when the volume's `detaching` transition finishes.
    #[serde(default)]
    pub detaching: bool,
    /// Compute Engine's `deviceName` of the attached disk (`instances.attachDisk`); `None` for
    /// Nova's attachments, which GCE shows as `persistent-disk-<index>`.
    #[serde(default)]
    pub device_name: Option<String>,
    /// Attached `READ_ONLY` (GCE's mode): such a disk may be attached read-only to several
    /// instances. Nova never attaches read-only.
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Volume {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: Option<String>,
    pub description: Option<String>,
    pub size: u64,
    pub status: String,
    pub availability_zone: String,
    pub volume_type: String,
    pub user_id: String,
    pub metadata: BTreeMap<String, String>,
    pub attachments: Vec<Attachment>,
    /// May be attached to several servers at once. Records written before it existed read as
    /// `false`.
    #[serde(default)]
    pub multiattach: bool,
}

impl_record!(Volume: VOLUMES, ("volume", "volumes", "Volume"), "itemNotFound");

/// Volumes attached to a server.
pub(crate) fn attached_to(r: &impl Read, server_id: &str) -> Vec<Volume> {
    let mut vols: Vec<Volume> = r
        .list::<Volume>(VOLUMES)
        .into_iter()
        .filter(|v| v.attachments.iter().any(|a| a.server_id == server_id))
        .collect();
    vols.sort_by(|a, b| {
        let dev = |v: &Volume| {
            v.attachments
                .iter()
                .find(|x| x.server_id == server_id)
                .map(|x| x.device.clone())
        };
        dev(a).cmp(&dev(b))
    });
    vols
}
