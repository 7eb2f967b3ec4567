//! Credentials a provider reads from a Kubernetes Secret and follows: the legacy OpenStack
//! provider's `[Global] secret-name`/`secret-namespace`, vSphere's global and per-vCenter
//! `secret-name`/`secret-namespace`.
//!
//! Upstream read such a Secret once at start. Here [`CredentialSecret::follow`] reads it at
//! start (a missing Secret, or one the provider refuses, stops start-up with an error naming
//! the Secret and the problem, as upstream), then watches it (a field selector on its name, so
//! RBAC may grant exactly that Secret): each new version goes to the provider's `apply`, so
//! a rotated password or key takes effect without a restart. A later version the provider
//! refuses, or the Secret's deletion, keeps the last good credentials in use and is reported
//! by [`CredentialSecret::health`] (the components' `/readyz` check `cloud-credentials`).
//! Only key names and the provider's reasons are ever logged or reported, never values.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt as _;

/// A Secret's place: namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecretRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A Secret's data, key to bytes (`data` merged with `stringData`, as the apiserver stores it).
pub type SecretData = BTreeMap<String, Vec<u8>>;

/// What a provider does with a version of its Secret: `Err` says why it refuses it (never
/// quoting a value).
pub type Apply = Arc<dyn Fn(&SecretData) -> Result<(), String> + Send + Sync>;

/// Reading a credentials Secret at start failed.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The Secret could not be read.
    #[error("reading the credentials Secret {secret}: {source}")]
    Read {
        /// Which Secret.
        secret: SecretRef,
        /// What the apiserver said.
        #[source]
        source: kube::Error,
    },
    /// The provider refused the Secret's content.
    #[error("the credentials Secret {secret}: {reason}")]
    Refused {
        /// Which Secret.
        secret: SecretRef,
        /// Why (names keys, never values).
        reason: String,
    },
}

/// A followed Secret: dropping it stops the watch.
pub struct CredentialSecret {
    secret: SecretRef,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Clone, Default)]
struct State {
    /// The resourceVersion of the credentials in use.
    applied: Option<String>,
    /// Why the newest version is not in use, when it is not.
    problem: Option<String>,
    /// Versions applied so far (the first at start included).
    applied_count: u64,
}

impl Drop for CredentialSecret {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl fmt::Debug for CredentialSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialSecret")
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}

/// The Secret's data: `data`, then `stringData` (which a client may send and a fake store
/// keep) over it.
pub fn secret_data(secret: &Secret) -> SecretData {
    let mut out: SecretData = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    out
}

impl CredentialSecret {
    /// Reads `secret` with `client` and hands its data to `apply`, then follows it in the
    /// background (a tokio task, stopped when the returned value is dropped).
    pub async fn follow(
        client: kube::Client,
        secret: SecretRef,
        apply: Apply,
    ) -> Result<Self, FollowError> {
        let api: Api<Secret> = Api::namespaced(client, &secret.namespace);
        let first = api
            .get(&secret.name)
            .await
            .map_err(|source| FollowError::Read {
                secret: secret.clone(),
                source,
            })?;
        apply(&secret_data(&first)).map_err(|reason| FollowError::Refused {
            secret: secret.clone(),
            reason,
        })?;
        let state = Arc::new(Mutex::new(State {
            applied: first.metadata.resource_version.clone(),
            problem: None,
            applied_count: 1,
        }));
        tracing::info!(secret = %secret, "credentials read from the Secret");
        let task = tokio::spawn(watch(api, secret.clone(), apply, state.clone()));
        Ok(CredentialSecret {
            secret,
            state,
            task,
        })
    }

    /// The Secret followed.
    pub fn secret(&self) -> &SecretRef {
        &self.secret
    }

    /// `Err` (for `/readyz`) while the newest version of the Secret is not in use: deleted,
    /// refused by the provider, or not watchable.
    pub fn health(&self) -> Result<(), String> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if self.task.is_finished() {
            return Err(format!(
                "Secret {}: no longer watched; credentials are not followed",
                self.secret
            ));
        }
        match &state.problem {
            None => Ok(()),
            Some(p) => Err(format!("Secret {}: {p}", self.secret)),
        }
    }

    /// How many versions of the Secret were applied (the one at start included).
    pub fn applied_count(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .applied_count
    }
}

/// A Kubernetes client for a component that has none of its own (the kubelet-helper, the
/// apiserver-plugin) to read its credentials Secret with: from `kubeconfig` when given, else
/// the in-cluster configuration (upstream's `createKubernetesClient`). The error says which.
pub async fn client_for(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::incluster()
            .map_err(|e| format!("no kubeconfig given and not in a cluster ({e})"))?,
    };
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Follows `secret` until aborted: every new version goes to `apply`.
async fn watch(api: Api<Secret>, secret: SecretRef, apply: Apply, state: Arc<Mutex<State>>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={}", secret.name));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    // Whether the Secret was seen since the watcher's last (re)list began.
    let mut seen_in_list = true;
    while let Some(event) = events.next().await {
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => {
                seen_in_list = true;
                let version = s.metadata.resource_version.clone();
                if version.is_some() && version == st.applied {
                    st.problem = None;
                    continue;
                }
                match apply(&secret_data(&s)) {
                    Ok(()) => {
                        tracing::info!(secret = %secret, resource_version = ?version, "credentials from the Secret changed; the next cloud request uses them");
                        st.applied = version;
                        st.problem = None;
                        st.applied_count += 1;
                    }
                    Err(reason) => {
                        tracing::error!(secret = %secret, resource_version = ?version, %reason, "the new version of the credentials Secret is refused; the previous credentials stay in use");
                        st.problem = Some(format!(
                            "version {} refused: {reason}; the previous credentials stay in use",
                            version.as_deref().unwrap_or("?")
                        ));
                    }
                }
            }
            Ok(watcher::Event::Delete(_)) => {
                tracing::error!(secret = %secret, "the credentials Secret was deleted; the credentials read before stay in use");
                st.problem = Some(DELETED.into());
            }
            Ok(watcher::Event::Init) => seen_in_list = false,
            Ok(watcher::Event::InitDone) => {
                if !seen_in_list {
                    tracing::error!(secret = %secret, "the credentials Secret is gone; the credentials read before stay in use");
                    st.problem = Some(DELETED.into());
                }
            }
            Err(e) => {
                tracing::warn!(secret = %secret, error = %e, "watching the credentials Secret");
                st.problem = Some(format!("cannot be watched: {e}"));
            }
        }
    }
}

const DELETED: &str = "not found (deleted); the credentials read before stay in use";
