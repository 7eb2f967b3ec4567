//! Instances, InstancesV2 and Zones, as the legacy provider's `gce_instances.go` and
//! `gce_zones.go`: node name = instance name (a domain suffix is cut off), provider ID
//! `gce://<project>/<zone>/<name>`, InternalIP each interface's `networkIP` and ExternalIP each
//! access config's `natIP`, the machine type's name as instance type, the region the zone's
//! name minus its last `-` part. For the instance this process runs on, addresses, ID and
//! type come from the metadata server (no API call), as upstream's in-tree kubelet did.

use async_trait::async_trait;
use hypercloud_cloudprovider::retry::{Attempt, RetryPolicy};
use hypercloud_cloudprovider::ProviderError as _;
use hypercloud_cloudprovider::{InstanceMetadata, Instances, InstancesV2, Zone, Zones};
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use serde_json::{json, Value};

use crate::client::last_segment;
use crate::error::{Error, Result};
use crate::{Gce, Resolved};

/// Reading the project metadata again after a stale fingerprint (412): five attempts, 2 s
/// apart, as upstream's `AddSSHKeyToAllInstances` polls every 2 s.
const STALE_FINGERPRINT_RETRY: RetryPolicy = RetryPolicy::new(
    5,
    std::time::Duration::from_secs(2),
    std::time::Duration::from_secs(2),
);

/// `gce://`
pub const PROVIDER_ID_PREFIX: &str = "gce://";

/// The project metadata key SSH keys go to (GCE's current key; upstream's in-tree provider
/// wrote the legacy `sshKeys`).
pub const SSH_KEYS: &str = "ssh-keys";

/// `gce://<project>/<zone>/<name>`
pub fn provider_id(project: &str, zone: &str, name: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{project}/{zone}/{name}")
}

/// `(project, zone, name)` of a provider ID.
pub fn parse_provider_id(id: &str) -> Result<(String, String, String)> {
    let rest = id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .ok_or_else(|| Error::ProviderId(id.into()))?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [p, z, n] if !p.is_empty() && !z.is_empty() && !n.is_empty() => {
            Ok((p.to_string(), z.to_string(), n.to_string()))
        }
        _ => Err(Error::ProviderId(id.into())),
    }
}

/// A zone's region, as upstream's `GetGCERegion`: `us-central1-a` → `us-central1`.
pub fn region_of_zone(zone: &str) -> Result<String> {
    match zone.rfind('-') {
        Some(i) if i > 0 => Ok(zone[..i].to_owned()),
        _ => Err(Error::Missing(format!(
            "zone {zone:?} has no region part (GCE zones are <region>-<letter>)"
        ))),
    }
}

/// Upstream's `canonicalizeInstanceName`: the instance name is the host name's first label.
pub(crate) fn instance_name(node_name: &str) -> &str {
    node_name.split('.').next().unwrap_or(node_name)
}

fn addresses_of(instance: &Value) -> Vec<NodeAddress> {
    let mut out = Vec::new();
    for nic in instance["networkInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(ip) = nic["networkIP"].as_str().filter(|s| !s.is_empty()) {
            out.push(NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            });
        }
        for ac in nic["accessConfigs"].as_array().into_iter().flatten() {
            if let Some(ip) = ac["natIP"].as_str().filter(|s| !s.is_empty()) {
                out.push(NodeAddress {
                    type_: "ExternalIP".into(),
                    address: ip.into(),
                });
            }
        }
    }
    out
}

/// Whether an instance status means the machine is off (the node lifecycle's shutdown taint).
fn is_shutdown(status: &str) -> bool {
    matches!(
        status,
        "TERMINATED" | "STOPPED" | "STOPPING" | "SUSPENDED" | "SUSPENDING"
    )
}

fn not_found_as_sentinel(e: Error) -> hypercloud_cloudprovider::Error {
    if e.is_not_found() {
        hypercloud_cloudprovider::Error::InstanceNotFound
    } else {
        e.into_provider_error()
    }
}

impl Gce {
    /// An instance by provider ID; `None` when GCE says it does not exist.
    async fn instance_by_provider_id(&self, id: &str) -> Result<Option<Value>> {
        let r = self.resolved().await?;
        let (project, zone, name) = parse_provider_id(id)?;
        match r
            .compute
            .get(
                &format!("projects/{project}/zones/{zone}/instances/{name}"),
                "instances.get",
            )
            .await
        {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// An instance by node name, in the managed zones (upstream `getInstanceByName`).
    pub(crate) async fn instance_by_name(&self, node_name: &str) -> Result<Option<Value>> {
        let r = self.resolved().await?;
        let name = instance_name(node_name);
        for zone in &r.managed_zones {
            match r
                .compute
                .get(
                    &r.compute.path(&format!("zones/{zone}/instances/{name}")),
                    "instances.get",
                )
                .await
            {
                Ok(v) => return Ok(Some(v)),
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    async fn must_by_name(&self, node_name: &str) -> hypercloud_cloudprovider::Result<Value> {
        self.instance_by_name(node_name)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)
    }

    async fn must_by_provider_id(&self, id: &str) -> hypercloud_cloudprovider::Result<Value> {
        self.instance_by_provider_id(id)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)
    }

    /// The instance of a Node: by provider ID when it has one, else by name.
    async fn instance_of_node(
        &self,
        node: &Node,
    ) -> hypercloud_cloudprovider::Result<Option<Value>> {
        let pid = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|p| !p.is_empty());
        Ok(match pid {
            Some(pid) => self.instance_by_provider_id(pid).await?,
            None => {
                self.instance_by_name(node.metadata.name.as_deref().unwrap_or_default())
                    .await?
            }
        })
    }

    /// Whether `node_name` is the instance this process runs on (answered by metadata).
    fn is_current(r: &Resolved, node_name: &str) -> bool {
        r.current_instance.as_deref() == Some(instance_name(node_name))
    }

    /// This instance's addresses from the metadata server (upstream's in-tree NodeAddresses).
    async fn metadata_addresses(&self) -> Result<Vec<NodeAddress>> {
        let mut out = Vec::new();
        let nics = self.metadata.get("instance/network-interfaces/").await?;
        for nic in nics
            .lines()
            .map(|l| l.trim_end_matches('/'))
            .filter(|l| !l.is_empty())
        {
            let ip = self
                .metadata
                .get(&format!("instance/network-interfaces/{nic}/ip"))
                .await?;
            out.push(NodeAddress {
                type_: "InternalIP".into(),
                address: ip,
            });
            let configs = self
                .metadata
                .get(&format!(
                    "instance/network-interfaces/{nic}/access-configs/"
                ))
                .await
                .unwrap_or_default();
            for ac in configs
                .lines()
                .map(|l| l.trim_end_matches('/'))
                .filter(|l| !l.is_empty())
            {
                let ip = self
                    .metadata
                    .get(&format!(
                        "instance/network-interfaces/{nic}/access-configs/{ac}/external-ip"
                    ))
                    .await?;
                if !ip.is_empty() {
                    out.push(NodeAddress {
                        type_: "ExternalIP".into(),
                        address: ip,
                    });
                }
            }
        }
        Ok(out)
    }

    fn id_of(instance: &Value) -> Result<String> {
        let link = instance["selfLink"].as_str().unwrap_or_default();
        let project = link
            .split("/projects/")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_default();
        let zone = last_segment(instance["zone"].as_str().unwrap_or_default());
        let name = instance["name"].as_str().unwrap_or_default();
        if project.is_empty() || zone.is_empty() || name.is_empty() {
            return Err(Error::Decode {
                operation: "instances.get".into(),
                message: format!("instance without selfLink, zone or name: {instance}"),
            });
        }
        Ok(provider_id(project, zone, name))
    }
}

fn machine_type(instance: &Value) -> String {
    last_segment(instance["machineType"].as_str().unwrap_or_default()).to_owned()
}

fn zone_of(instance: &Value) -> Result<Zone> {
    let zone = last_segment(instance["zone"].as_str().unwrap_or_default()).to_owned();
    Ok(Zone {
        region: region_of_zone(&zone)?,
        failure_domain: zone,
    })
}

#[async_trait]
impl Instances for Gce {
    async fn node_addresses(
        &self,
        name: &str,
    ) -> hypercloud_cloudprovider::Result<Vec<NodeAddress>> {
        let r = self.resolved().await?;
        if Self::is_current(r, name) {
            return Ok(self.metadata_addresses().await?);
        }
        Ok(addresses_of(&self.must_by_name(name).await?))
    }

    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<Vec<NodeAddress>> {
        Ok(addresses_of(&self.must_by_provider_id(provider_id).await?))
    }

    /// `<project>/<zone>/<name>` (the provider ID without `gce://`).
    async fn instance_id(&self, name: &str) -> hypercloud_cloudprovider::Result<String> {
        let r = self.resolved().await?;
        if Self::is_current(r, name) {
            let zone = last_segment(&self.metadata.get("instance/zone").await?).to_owned();
            let project = self.metadata.get("project/project-id").await?;
            return Ok(format!("{project}/{zone}/{}", instance_name(name)));
        }
        let id = Self::id_of(&self.must_by_name(name).await?)?;
        Ok(id.trim_start_matches(PROVIDER_ID_PREFIX).to_owned())
    }

    async fn instance_type(&self, name: &str) -> hypercloud_cloudprovider::Result<String> {
        let r = self.resolved().await?;
        if Self::is_current(r, name) {
            return Ok(last_segment(&self.metadata.get("instance/machine-type").await?).to_owned());
        }
        Ok(machine_type(&self.must_by_name(name).await?))
    }

    async fn instance_type_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<String> {
        Ok(machine_type(&self.must_by_provider_id(provider_id).await?))
    }

    /// Adds `user:TYPE BLOB [COMMENT] user@user` to the project's `ssh-keys` metadata (once), so that
    /// every instance's metadata server shows it: the kube-apiserver's SSH tunnels to the
    /// nodes. The user and key are checked first ([`hypercloud_cloudprovider::ssh`]): one entry
    /// per line, so a line break or a colon would add entries of the sender's choosing; and an
    /// entry for the same user and key (type and blob, whatever its comment) counts as present,
    /// so a restart adds nothing.
    async fn add_ssh_key_to_all_instances(
        &self,
        user: &str,
        key: &[u8],
    ) -> hypercloud_cloudprovider::Result<()> {
        use hypercloud_cloudprovider::ssh::{check_user, SshPublicKey};
        use hypercloud_cloudprovider::Error::RefusedSshKey;
        check_user(user).map_err(RefusedSshKey)?;
        let key = SshPublicKey::parse(key).map_err(RefusedSshKey)?;
        // Upstream's entry: the key line as given, then `user@user`.
        let comment = key
            .comment
            .as_deref()
            .map(|c| format!(" {c}"))
            .unwrap_or_default();
        let key_string = format!(
            "{user}:{} {}{comment} {user}@{user}",
            key.key_type, key.blob
        );
        let present = |value: &str| {
            value.lines().any(|line| {
                line.trim()
                    .split_once(':')
                    .filter(|(u, _)| *u == user)
                    .and_then(|(_, k)| SshPublicKey::parse(k.as_bytes()).ok())
                    .is_some_and(|k| k.same_key(&key))
            })
        };
        let r = self.resolved().await?;
        let c = &r.compute;
        // A concurrent change makes the fingerprint stale (412): read again and retry after a
        // pause, as upstream polls (every 2 s); never back to back.
        let attempt = |_| async {
            let project = match c
                .get(c.path("").trim_end_matches('/'), "projects.get")
                .await
            {
                Ok(p) => p,
                Err(e) => return Attempt::Done(Err(e)),
            };
            let meta = &project["commonInstanceMetadata"];
            let mut items: Vec<Value> = meta["items"].as_array().cloned().unwrap_or_default();
            match items.iter_mut().find(|i| i["key"] == SSH_KEYS) {
                Some(item) => {
                    let value = item["value"].as_str().unwrap_or_default().to_owned();
                    if present(&value) {
                        tracing::info!(user, "SSH key already in the project metadata");
                        return Attempt::Done(Ok(()));
                    }
                    item["value"] = json!(if value.is_empty() {
                        key_string.clone()
                    } else {
                        format!("{value}\n{key_string}")
                    });
                }
                None => items.push(json!({"key": SSH_KEYS, "value": key_string})),
            }
            let body = json!({"fingerprint": meta["fingerprint"], "items": items});
            match c
                .mutate(
                    reqwest::Method::POST,
                    &c.path("setCommonInstanceMetadata"),
                    Some(&body),
                    "projects.setCommonInstanceMetadata",
                )
                .await
            {
                Ok(()) => {
                    tracing::info!(user, "added an SSH key to the project metadata");
                    Attempt::Done(Ok(()))
                }
                Err(e @ Error::Api { status: 412, .. }) => Attempt::Again {
                    outcome: Err(e),
                    retry_after: None,
                },
                Err(e) => Attempt::Done(Err(e)),
            }
        };
        let retried = STALE_FINGERPRINT_RETRY.run(attempt, |_, _, _| {}).await;
        if retried.exhausted {
            return Err(Error::Api {
                operation: "projects.setCommonInstanceMetadata".into(),
                status: 412,
                reason: "conditionNotMet".into(),
                message: "the project metadata kept changing; gave up after 5 attempts".into(),
            }
            .into());
        }
        retried.outcome.map_err(Into::into)
    }

    /// The host name, as upstream.
    async fn current_node_name(&self, hostname: &str) -> hypercloud_cloudprovider::Result<String> {
        Ok(hostname.to_owned())
    }

    async fn instance_exists_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<bool> {
        Ok(self.instance_by_provider_id(provider_id).await?.is_some())
    }

    async fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<bool> {
        let i = self.must_by_provider_id(provider_id).await?;
        Ok(is_shutdown(i["status"].as_str().unwrap_or_default()))
    }
}

#[async_trait]
impl InstancesV2 for Gce {
    async fn instance_exists(&self, node: &Node) -> hypercloud_cloudprovider::Result<bool> {
        Ok(self.instance_of_node(node).await?.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> hypercloud_cloudprovider::Result<bool> {
        let i = self
            .instance_of_node(node)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)?;
        Ok(is_shutdown(i["status"].as_str().unwrap_or_default()))
    }

    async fn instance_metadata(
        &self,
        node: &Node,
    ) -> hypercloud_cloudprovider::Result<InstanceMetadata> {
        let i = self
            .instance_of_node(node)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)?;
        let zone = zone_of(&i)?;
        Ok(InstanceMetadata {
            provider_id: Self::id_of(&i)?,
            instance_type: machine_type(&i),
            node_addresses: addresses_of(&i),
            zone: zone.failure_domain,
            region: zone.region,
            additional_labels: Default::default(),
        })
    }
}

#[async_trait]
impl Zones for Gce {
    /// The local zone (`local-zone`, else the metadata server's).
    async fn get_zone(&self) -> hypercloud_cloudprovider::Result<Zone> {
        let r = self.resolved().await?;
        Ok(Zone {
            failure_domain: r.local_zone.clone(),
            region: r.region.clone(),
        })
    }

    /// Read off the provider ID, as upstream (no API call).
    async fn get_zone_by_provider_id(
        &self,
        provider_id: &str,
    ) -> hypercloud_cloudprovider::Result<Zone> {
        let (_, zone, _) = parse_provider_id(provider_id)?;
        Ok(Zone {
            region: region_of_zone(&zone)?,
            failure_domain: zone,
        })
    }

    async fn get_zone_by_node_name(&self, name: &str) -> hypercloud_cloudprovider::Result<Zone> {
        let i = self
            .instance_by_name(name)
            .await
            .map_err(not_found_as_sentinel)?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)?;
        Ok(zone_of(&i)?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip_and_bad_ones_are_refused() {
        let id = provider_id("demo", "us-central1-a", "node-1");
        assert_eq!(id, "gce://demo/us-central1-a/node-1");
        assert_eq!(
            parse_provider_id(&id).unwrap(),
            ("demo".into(), "us-central1-a".into(), "node-1".into())
        );
        for bad in [
            "aws:///i-1",
            "gce://demo/node-1",
            "gce://demo//n",
            "gce://a/b/c/d",
        ] {
            assert!(parse_provider_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn regions_are_zones_without_their_letter() {
        assert_eq!(region_of_zone("us-central1-a").unwrap(), "us-central1");
        assert_eq!(region_of_zone("europe-west4-b").unwrap(), "europe-west4");
        assert!(region_of_zone("nova").is_err());
    }

    #[test]
    fn addresses_come_from_interfaces_and_access_configs() {
        let i = json!({"networkInterfaces": [
            {"networkIP": "10.0.0.2", "accessConfigs": [{"natIP": "34.1.2.3"}, {"natIP": ""}]},
            {"networkIP": "10.1.0.2"}]});
        let a: Vec<(String, String)> = addresses_of(&i)
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            a,
            [
                ("InternalIP".to_string(), "10.0.0.2".to_string()),
                ("ExternalIP".into(), "34.1.2.3".into()),
                ("InternalIP".into(), "10.1.0.2".into())
            ]
        );
    }

    #[test]
    fn shutdown_statuses() {
        assert!(is_shutdown("TERMINATED"));
        assert!(!is_shutdown("RUNNING"));
        assert!(!is_shutdown("PROVISIONING"));
        assert_eq!(instance_name("node-1.c.demo.internal"), "node-1");
    }
}
