//! Identity v3 (Keystone) records: projects and users, as stored. The API
//! (`api/identity`) seeds and serves them; the metadata servers read a server's
//! project. Tokens and application credentials stay with the API, which alone issues and checks
//! them. Upstream equivalent: `keystone.resource.backends.sql` and `keystone.identity.backends.sql`.

use serde::{Deserialize, Serialize};

pub(crate) const PROJECTS: &str = "projects";
pub(crate) const USERS: &str = "users";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Project {
    pub id: String,
    pub name: String,
    pub domain_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct User {
    pub id: String,
    pub name: String,
    pub domain_id: String,
    pub default_project_id: String,
    /// The user's own password, as a salted SHA-256 (`api/identity/users`); `None`: the
    /// server's `--password` (the seeded user, until its password is changed).
    #[serde(default)]
    pub password_sha256: Option<String>,
}
