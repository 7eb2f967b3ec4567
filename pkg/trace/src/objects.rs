//! The cluster objects the cloud calls change, as they change: Nodes (taints, addresses,
//! labels, providerID), Services (ingress) and PersistentVolumes (labels), watched on the
//! apiserver and turned into [`Body::Object`] events of the [`Store`] when what the page shows
//! of them changes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Service};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{json, Value};

use crate::live::{now_unix_ms, Body, Store};

/// What the page shows of an object.
pub trait Summary:
    Resource + Clone + Debug + Send + Sync + serde::de::DeserializeOwned + 'static
{
    /// The kind's name.
    const KIND: &'static str;
    /// The plural the errors name.
    const WATCHED: &'static str;
    /// Its summary.
    fn summary(&self) -> Value;
}

fn labels(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Value {
    json!(meta.labels.clone().unwrap_or_default())
}

impl Summary for Node {
    const KIND: &'static str = "Node";
    const WATCHED: &'static str = "Nodes";
    fn summary(&self) -> Value {
        let spec = self.spec.clone().unwrap_or_default();
        let status = self.status.clone().unwrap_or_default();
        let taints: Vec<String> = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        let addresses: Vec<String> = status
            .addresses
            .unwrap_or_default()
            .into_iter()
            .map(|a| format!("{} {}", a.type_, a.address))
            .collect();
        let ready = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status);
        json!({
            "taints": taints,
            "addresses": addresses,
            "labels": labels(&self.metadata),
            "provider_id": spec.provider_id,
            "ready": ready,
        })
    }
}

/// The annotations a cloud provider writes or reads (the rest is the user's business).
fn cloud_annotation(key: &str) -> bool {
    key.contains("kubernetes.io/") || key.contains("openstack.org/")
}

impl Summary for Service {
    const KIND: &'static str = "Service";
    const WATCHED: &'static str = "Services";
    fn summary(&self) -> Value {
        let spec = self.spec.clone().unwrap_or_default();
        let ingress: Vec<String> = self
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.clone())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|i| i.ip.or(i.hostname))
            .collect();
        let ports: Vec<String> = spec
            .ports
            .unwrap_or_default()
            .into_iter()
            .map(|p| format!("{}/{}", p.port, p.protocol.unwrap_or_else(|| "TCP".into())))
            .collect();
        let annotations: BTreeMap<String, String> = self
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| cloud_annotation(k))
            .collect();
        json!({
            "type": spec.type_.unwrap_or_else(|| "ClusterIP".into()),
            "ingress": ingress,
            "ports": ports,
            "finalizers": self.metadata.finalizers.clone().unwrap_or_default(),
            "annotations": annotations,
        })
    }
}

impl Summary for PersistentVolume {
    const KIND: &'static str = "PersistentVolume";
    const WATCHED: &'static str = "PersistentVolumes";
    fn summary(&self) -> Value {
        let spec = self.spec.clone().unwrap_or_default();
        let source = if let Some(csi) = &spec.csi {
            format!("csi {}", csi.driver)
        } else if spec.cinder.is_some() {
            "cinder".into()
        } else if spec.aws_elastic_block_store.is_some() {
            "awsElasticBlockStore".into()
        } else if spec.gce_persistent_disk.is_some() {
            "gcePersistentDisk".into()
        } else if spec.vsphere_volume.is_some() {
            "vsphereVolume".into()
        } else {
            "other".into()
        };
        let claim = spec.claim_ref.map(|c| {
            format!(
                "{}/{}",
                c.namespace.unwrap_or_default(),
                c.name.unwrap_or_default()
            )
        });
        json!({
            "labels": labels(&self.metadata),
            "phase": self.status.as_ref().and_then(|s| s.phase.clone()),
            "source": source,
            "claim": claim,
        })
    }
}

/// Watches Nodes, Services and PersistentVolumes until the watches end (they do not: the
/// watcher re-lists after errors, each reported once as an error event).
pub async fn watch_all(client: Client, store: Arc<Store>) {
    tokio::join!(
        watch::<Node>(Api::all(client.clone()), store.clone()),
        watch::<Service>(Api::all(client.clone()), store.clone()),
        watch::<PersistentVolume>(Api::all(client), store),
    );
}

type Key = (Option<String>, String);

/// The events of one kind: an object event whenever an object's summary changes, a deletion
/// when it goes (also when a re-list no longer has it).
async fn watch<K: Summary>(api: Api<K>, store: Arc<Store>) {
    let mut last: HashMap<Key, Value> = HashMap::new();
    let mut listing: Option<HashSet<Key>> = None;
    let mut last_error: Option<String> = None;
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => {
                last_error = None;
                e
            }
            Err(e) => {
                let message = format!("watching {} failed (retrying): {e}", K::WATCHED);
                if last_error.as_deref() != Some(message.as_str()) {
                    store.error(None, format!("watch {}", K::WATCHED), message.clone());
                    last_error = Some(message);
                }
                continue;
            }
        };
        match event {
            Event::Init => listing = Some(HashSet::new()),
            Event::InitApply(obj) => {
                if let Some(seen) = listing.as_mut() {
                    seen.insert(key(&obj));
                }
                changed(&obj, &mut last, &store);
            }
            Event::InitDone => {
                if let Some(seen) = listing.take() {
                    let gone: Vec<Key> = last
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for k in gone {
                        if let Some(summary) = last.remove(&k) {
                            deleted::<K>(k, summary, &store);
                        }
                    }
                }
            }
            Event::Apply(obj) => changed(&obj, &mut last, &store),
            Event::Delete(obj) => {
                let k = key(&obj);
                last.remove(&k);
                deleted::<K>(k, obj.summary(), &store);
            }
        }
    }
}

fn key<K: Summary>(obj: &K) -> Key {
    (obj.namespace(), obj.name_any())
}

fn changed<K: Summary>(obj: &K, last: &mut HashMap<Key, Value>, store: &Store) {
    let summary = obj.summary();
    let k = key(obj);
    if last.get(&k) == Some(&summary) {
        return;
    }
    last.insert(k.clone(), summary.clone());
    emit::<K>(k, summary, false, store);
}

fn deleted<K: Summary>(k: Key, summary: Value, store: &Store) {
    emit::<K>(k, summary, true, store);
}

fn emit<K: Summary>((namespace, name): Key, summary: Value, deleted: bool, store: &Store) {
    store.push(
        now_unix_ms(),
        None,
        &Body::Object {
            kind: K::KIND,
            namespace,
            name,
            deleted,
            summary,
        },
    );
}
#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus, Taint};

    #[test]
    fn a_node_summary_names_taints_addresses_and_provider_id() {
        let node = Node {
            metadata: kube::api::ObjectMeta {
                name: Some("node-1".into()),
                labels: Some(
                    [(
                        "topology.kubernetes.io/zone".to_string(),
                        "nova".to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some("local:///abc".into()),
                taints: Some(vec![Taint {
                    key: "node.cloudprovider.kubernetes.io/uninitialized".into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![NodeAddress {
                    type_: "InternalIP".into(),
                    address: "127.1.0.1".into(),
                }]),
                ..Default::default()
            }),
        };
        let s = node.summary();
        assert_eq!(
            s["taints"][0],
            "node.cloudprovider.kubernetes.io/uninitialized:NoSchedule"
        );
        assert_eq!(s["addresses"][0], "InternalIP 127.1.0.1");
        assert_eq!(s["provider_id"], "local:///abc");
        assert_eq!(s["labels"]["topology.kubernetes.io/zone"], "nova");
        let store = Store::new(10);
        let mut last = HashMap::new();
        changed(&node, &mut last, &store);
        changed(&node, &mut last, &store);
        assert_eq!(
            store.after(0, 10).events.len(),
            1,
            "an unchanged summary is no event"
        );
    }
}
