//! Errors of the checks; each becomes a denial message, never a panic or a 500.

/// Why a check could not decide in favour of the request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object in the review is not the kind the check expects.
    #[error("decoding {kind}")]
    DecodeObject {
        /// Expected kind.
        kind: &'static str,
        /// Why.
        source: Box<serde_json::Error>,
    },
    /// The cloud could not label the volume.
    #[error("querying the cloud for the volume of PersistentVolume {pv}")]
    LabelVolume {
        /// The PV.
        pv: String,
        /// The provider's error.
        source: Box<hypercloud_cloudprovider::Error>,
    },
    /// Building the JSON patch failed.
    #[error("building the patch: {0}")]
    BuildPatch(String),
    /// The cloud could not say whether the instance exists.
    #[error("checking the cloud for the instance of node {node}")]
    CheckInstance {
        /// The node.
        node: String,
        /// The provider's error.
        source: Box<hypercloud_cloudprovider::Error>,
    },
    /// Reading a StorageClass or PV failed.
    #[error("reading {what}")]
    Read {
        /// What was read.
        what: String,
        /// The API error.
        source: Box<kube::Error>,
    },
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
