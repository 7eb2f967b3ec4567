//! A service account's key: what IAM keeps of a key it made (`projects.serviceAccounts.keys`),
//! the public half only. The private half goes to the caller once, in the key file, and is not
//! stored. The GCE dialect's token endpoint verifies assertions against these. Service accounts
//! themselves are not records: an email names one, and its keys are all there is of it.
//! Upstream equivalent: IAM's `ServiceAccountKey`.

use serde::{Deserialize, Serialize};

use crate::model::{Meta, Names, Record};

/// A stored key: its ID is the key ID (`private_key_id`, the assertions' `kid`), its project
/// the Keystone project it was made in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ServiceAccountKey {
    #[serde(flatten)]
    pub meta: Meta,
    /// The service account (`name@project.iam.gserviceaccount.com`).
    pub email: String,
    /// The project's name, as the key's resource name shows it.
    pub project_name: String,
    /// The RSA public key: PKCS#1 `RSAPublicKey`, DER, base64.
    pub public_key: String,
}

impl Record for ServiceAccountKey {
    const TABLE: &'static str = "gce_service_account_keys";
    const NAMES: Names = Names {
        one: "key",
        many: "keys",
        title: "Service account key",
    };
    const NOT_FOUND: &'static str = "notFound";
    const INDEXED: &'static [&'static str] = &["id", "email", "project_id"];

    fn meta(&self) -> &Meta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut Meta {
        &mut self.meta
    }
}
