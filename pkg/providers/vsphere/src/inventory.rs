//! The vSphere inventory as the provider needs it: VMs with only the properties a Node needs,
//! the datacenters in scope, a host's ancestry, and the tags on objects.
//!
//! Many nodes, few calls: look-ups are answered from one listing of every VM in the configured
//! datacenters (a `ContainerView` read by one paged `RetrievePropertiesEx`), kept for
//! `[Hypercloud] cache-ttl`; concurrent callers share one listing. A key missing from a cached
//! listing is looked for once more in a new one; absence from a listing made for this very
//! call is final. With `cache-ttl = 0` every look-up goes through `SearchIndex`
//! (`FindByUuid`, `FindByDnsName`, `FindByIp`, `FindAllByUuid`) and reads one VM's properties,
//! as upstream does for every node. Ancestry and tags are read in one call each per host and
//! cached for `tag-cache-ttl`.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hypercloud_cloudprovider::pager::Pager;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::client::Client;
use crate::soap::{
    self, GuestNicInfo, Moref, ObjectContent, ObjectSpec, PropertyFilterSpec, PropertySpec,
    RetrieveOptions, Selection,
};
use crate::{Error, Result};

/// The VM properties read, and only those.
pub(crate) const VM_PROPERTIES: [&str; 9] = [
    "name",
    "config.uuid",
    "runtime.powerState",
    "runtime.host",
    "guest.hostName",
    "guest.net",
    "summary.config.numCpu",
    "summary.config.memorySizeMB",
    "summary.config.guestId",
];

/// The VM properties read to find disks.
pub(crate) const VM_DEVICE_PROPERTIES: [&str; 3] =
    ["name", "config.uuid", "config.hardware.device"];

const PAGE: u32 = 1000;

/// One VM as a Node needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Vm {
    /// Which vCenter has it: the index of its inventory (and of its [`crate::config::VCenter`]
    /// in [`crate::Config::vcenters`]).
    pub vcenter: usize,
    pub moref: Moref,
    pub name: String,
    /// `config.uuid` (the SMBIOS UUID), lower case.
    pub uuid: String,
    pub power_state: String,
    /// ID of the `HostSystem` it runs on.
    pub host: Option<String>,
    /// `guest.hostName` as VMware Tools reports it.
    pub hostname: String,
    pub nics: Vec<GuestNicInfo>,
    pub num_cpu: u32,
    pub memory_mb: u64,
    pub guest_id: String,
}

impl Vm {
    fn from_content(vcenter: usize, o: &ObjectContent) -> Self {
        let num = |p: &str| {
            o.text(p)
                .and_then(|t| t.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        Vm {
            vcenter,
            moref: o.obj.clone(),
            name: o.text("name").unwrap_or_default().to_owned(),
            uuid: o.text("config.uuid").unwrap_or_default().to_lowercase(),
            power_state: o.text("runtime.powerState").unwrap_or_default().to_owned(),
            host: o.text("runtime.host").map(str::to_owned),
            hostname: o.text("guest.hostName").unwrap_or_default().to_owned(),
            nics: o
                .get("guest.net")
                .map(|v| v.nics.clone())
                .unwrap_or_default(),
            num_cpu: u32::try_from(num("summary.config.numCpu")).unwrap_or(u32::MAX),
            memory_mb: num("summary.config.memorySizeMB"),
            guest_id: o
                .text("summary.config.guestId")
                .unwrap_or_default()
                .to_owned(),
        }
    }

    fn ips(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.nics
            .iter()
            .flat_map(|n| n.ip_address.iter())
            .filter_map(|s| s.parse().ok())
    }
}

/// How a Node names its VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key<'a> {
    /// The SMBIOS UUID (from a provider ID or the machine itself).
    Uuid(&'a str),
    /// A node name: the VM's name, its guest DNS name, or one of its IPs.
    Name(&'a str),
}

/// A VMware BIOS UUID with its first three groups byte-swapped: how some guests
/// (`/sys/class/dmi/id/product_uuid` on older kernels, Photon 2) report it.
pub(crate) fn swapped_uuid(uuid: &str) -> Option<String> {
    let parts: Vec<&str> = uuid.split('-').collect();
    if parts.len() != 5 || parts[..3].iter().any(|p| p.len() % 2 != 0) {
        return None;
    }
    let swap = |p: &str| -> String {
        let bytes: Vec<&str> = (0..p.len()).step_by(2).map(|i| &p[i..i + 2]).collect();
        bytes.into_iter().rev().collect()
    };
    Some(format!(
        "{}-{}-{}-{}-{}",
        swap(parts[0]),
        swap(parts[1]),
        swap(parts[2]),
        parts[3],
        parts[4]
    ))
}

/// One listing of every VM in scope, indexed.
#[derive(Default)]
pub(crate) struct Snapshot {
    vms: Vec<Vm>,
    by_uuid: HashMap<String, usize>,
    by_name: HashMap<String, usize>,
}

impl Snapshot {
    fn new(vms: Vec<Vm>) -> Self {
        let mut s = Snapshot {
            vms,
            ..Default::default()
        };
        for (i, vm) in s.vms.iter().enumerate() {
            s.by_uuid.entry(vm.uuid.clone()).or_insert(i);
            // Names first, then guest DNS names and IPs: a VM name wins a clash.
            s.by_name.entry(vm.name.clone()).or_insert(i);
        }
        for (i, vm) in s.vms.iter().enumerate() {
            if !vm.hostname.is_empty() {
                s.by_name.entry(vm.hostname.clone()).or_insert(i);
            }
            for ip in vm.ips() {
                s.by_name.entry(ip.to_string()).or_insert(i);
            }
        }
        s
    }

    fn find(&self, key: Key<'_>) -> Option<&Vm> {
        let i = match key {
            Key::Uuid(u) => {
                let u = u.to_lowercase();
                self.by_uuid
                    .get(&u)
                    .or_else(|| swapped_uuid(&u).and_then(|s| self.by_uuid.get(&s)))
            }
            Key::Name(n) => self.by_name.get(n).or_else(|| {
                n.parse::<IpAddr>()
                    .ok()
                    .and_then(|ip| self.by_name.get(&ip.to_string()))
            }),
        }?;
        self.vms.get(*i)
    }

    pub fn len(&self) -> usize {
        self.vms.len()
    }
}

/// What one look-up in one vCenter's listing found.
#[derive(Debug)]
pub(crate) enum Found {
    /// The VM (boxed: the other variants are empty).
    Vm(Box<Vm>),
    /// Not in this vCenter: the listing was just made (or `SearchIndex` was asked).
    Absent,
    /// Not in a listing made earlier: a new listing may have it.
    NotInCachedListing,
}

/// A tag as the zone look-up needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    pub name: String,
    pub category: String,
}

#[derive(Deserialize)]
struct TagJson {
    name: String,
    category_id: String,
}

#[derive(Deserialize)]
struct CategoryJson {
    name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct ObjectId {
    id: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize)]
struct ObjectIds<'a> {
    object_ids: &'a [ObjectId],
}

#[derive(Deserialize)]
struct AttachedTags {
    object_id: ObjectId,
    #[serde(default)]
    tag_ids: Option<Vec<String>>,
}

type Timed<T> = Option<(Instant, T)>;

/// The inventory reader of one vCenter, with its caches.
pub(crate) struct Inventory {
    /// Its place among the configured vCenters (what [`Vm::vcenter`] says).
    pub index: usize,
    pub client: Client,
    ttl: Duration,
    tag_ttl: Duration,
    /// Datacenters in scope (resolved by `resolve_datacenters`); empty: the root folder.
    containers: Mutex<Vec<Moref>>,
    /// Container views by container, with the session generation they belong to.
    views: Mutex<HashMap<String, (u64, Moref)>>,
    snapshot: Mutex<Timed<Arc<Snapshot>>>,
    /// Host ID → chain of ancestors (host first).
    ancestry: Mutex<HashMap<String, (Instant, Vec<Moref>)>>,
    /// Object ID → attached tag IDs.
    attached: Mutex<HashMap<String, (Instant, Vec<String>)>>,
    /// Tag ID → tag; category ID → name.
    tags: Mutex<HashMap<String, Tag>>,
    categories: Mutex<HashMap<String, String>>,
    /// Reads of a task after its first (it was still running): how long vCenter took, not
    /// what the provider asked for.
    task_repolls: std::sync::atomic::AtomicU64,
}

impl Inventory {
    pub fn new(index: usize, client: Client, ttl: Duration, tag_ttl: Duration) -> Self {
        Inventory {
            index,
            client,
            ttl,
            tag_ttl,
            containers: Mutex::new(Vec::new()),
            views: Mutex::new(HashMap::new()),
            snapshot: Mutex::new(None),
            ancestry: Mutex::new(HashMap::new()),
            attached: Mutex::new(HashMap::new()),
            tags: Mutex::new(HashMap::new()),
            categories: Mutex::new(HashMap::new()),
            task_repolls: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Reads of tasks after their first, so far.
    pub fn task_repolls(&self) -> u64 {
        self.task_repolls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Checks that every configured datacenter exists (`FindByInventoryPath`) and scopes the
    /// listings to them; an unknown one is an error naming it and the ones that exist.
    pub async fn resolve_datacenters(&self, names: &[String]) -> Result<()> {
        let mut found = Vec::new();
        for name in names {
            match self.find_by_path(name).await? {
                Some(m) if m.kind == "Datacenter" => found.push(m),
                _ => {
                    let known = self.datacenter_names().await.unwrap_or_default();
                    return Err(Error::UnknownDatacenter {
                        name: name.clone(),
                        server: self.client.vcenter().address(),
                        known: if known.is_empty() {
                            "none".into()
                        } else {
                            known.join(", ")
                        },
                    });
                }
            }
        }
        *self.containers.lock().await = found;
        Ok(())
    }

    /// Names of every datacenter.
    pub async fn all_datacenter_names(&self) -> Result<Vec<String>> {
        self.datacenter_names().await
    }

    /// `SearchIndex.FindByInventoryPath`.
    pub async fn find_by_path(&self, path: &str) -> Result<Option<Moref>> {
        let path = path.to_owned();
        self.client
            .call(|sc| {
                Ok(soap::FindByInventoryPath::new(
                    search_index(sc)?,
                    path.clone(),
                ))
            })
            .await
    }

    /// `RetrievePropertiesEx` of a spec, every page.
    pub async fn retrieve_objects(&self, spec: PropertyFilterSpec) -> Result<Vec<ObjectContent>> {
        self.retrieve(spec).await
    }

    async fn datacenter_names(&self) -> Result<Vec<String>> {
        let root = self.client.service_content().await?.root_folder.clone();
        let objs = self.list_view(&root, "Datacenter", &["name"]).await?;
        Ok(objs
            .iter()
            .filter_map(|o| o.text("name").map(str::to_owned))
            .collect())
    }

    async fn scopes(&self) -> Result<Vec<Moref>> {
        let c = self.containers.lock().await.clone();
        if c.is_empty() {
            Ok(vec![self
                .client
                .service_content()
                .await?
                .root_folder
                .clone()])
        } else {
            Ok(c)
        }
    }

    /// The datacenters in scope as resolved at start-up, in the configured order (empty when
    /// none is configured).
    pub async fn datacenters(&self) -> Vec<Moref> {
        self.containers.lock().await.clone()
    }

    /// Every VM in scope with its name, `config.uuid` and devices (one container view per
    /// session and one paged `RetrievePropertiesEx`): who has which disk.
    pub async fn vm_devices(&self) -> Result<Vec<ObjectContent>> {
        let mut out = Vec::new();
        for scope in self.scopes().await? {
            out.extend(
                self.list_view(&scope, "VirtualMachine", &VM_DEVICE_PROPERTIES)
                    .await?,
            );
        }
        Ok(out)
    }

    /// Every datastore in scope: its reference and name.
    pub async fn datastores(&self) -> Result<Vec<(Moref, String)>> {
        let mut out = Vec::new();
        for scope in self.scopes().await? {
            for o in self.list_view(&scope, "Datastore", &["name"]).await? {
                let name = o.text("name").unwrap_or_default().to_owned();
                out.push((o.obj, name));
            }
        }
        Ok(out)
    }

    /// Every datastore in scope with its name and `browser` (its `HostDatastoreBrowser`).
    pub async fn datastore_browsers(&self) -> Result<Vec<ObjectContent>> {
        let mut out = Vec::new();
        for scope in self.scopes().await? {
            out.extend(
                self.list_view(&scope, "Datastore", &["name", "browser"])
                    .await?,
            );
        }
        Ok(out)
    }

    /// Every datastore in scope with its name, `summary.freeSpace` and `host` (the hosts
    /// that mount it): where a volume of a zone can go.
    pub async fn datastore_mounts(&self) -> Result<Vec<ObjectContent>> {
        let mut out = Vec::new();
        for scope in self.scopes().await? {
            out.extend(
                self.list_view(&scope, "Datastore", &["name", "summary.freeSpace", "host"])
                    .await?,
            );
        }
        Ok(out)
    }

    /// One VM's name, `config.uuid` and devices; `None` when it is gone.
    pub async fn vm_devices_of(&self, vm: &Moref) -> Result<Option<ObjectContent>> {
        let objs = self
            .retrieve(PropertyFilterSpec {
                prop_set: vec![PropertySpec {
                    kind: "VirtualMachine".into(),
                    path_set: VM_DEVICE_PROPERTIES
                        .iter()
                        .map(|p| (*p).to_owned())
                        .collect(),
                }],
                object_set: vec![ObjectSpec {
                    obj: vm.clone(),
                    skip: false,
                    select_set: Vec::new(),
                }],
            })
            .await;
        match objs {
            Ok(objs) => Ok(objs.into_iter().next()),
            Err(Error::Fault { fault, .. }) if fault == "ManagedObjectNotFound" => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits for a task to end (polling `info.state`, 50 ms doubling to 1 s, for at most
    /// `timeout`, `[Hypercloud] task-timeout`): `Ok` when it succeeded, [`Error::Task`] naming its fault when it
    /// failed. `operation` is the method that started it.
    pub async fn wait_for_task(
        &self,
        task: &Moref,
        operation: &str,
        timeout: Duration,
    ) -> Result<()> {
        self.wait_for_task_result(task, operation, timeout)
            .await
            .map(|_| ())
    }

    /// As [`Inventory::wait_for_task`], reading the task's `info.result` with its state (no
    /// request more): the result of a task that succeeded.
    pub async fn wait_for_task_result(
        &self,
        task: &Moref,
        operation: &str,
        timeout: Duration,
    ) -> Result<crate::soap::Value> {
        let start = Instant::now();
        let mut delay = Duration::from_millis(50);
        loop {
            let objs = self
                .retrieve(PropertyFilterSpec {
                    prop_set: vec![PropertySpec {
                        kind: "Task".into(),
                        path_set: vec![
                            "info.state".into(),
                            "info.error".into(),
                            "info.result".into(),
                        ],
                    }],
                    object_set: vec![ObjectSpec {
                        obj: task.clone(),
                        skip: false,
                        select_set: Vec::new(),
                    }],
                })
                .await?;
            let info = objs.first();
            let state = info
                .and_then(|o| o.text("info.state"))
                .unwrap_or_default()
                .to_owned();
            match state.as_str() {
                "success" => {
                    return Ok(info
                        .and_then(|o| o.get("info.result"))
                        .cloned()
                        .unwrap_or_default())
                }
                "error" => {
                    let err = info.and_then(|o| o.get("info.error"));
                    return Err(Error::Task {
                        operation: operation.into(),
                        task: task.value.clone(),
                        fault: err
                            .and_then(|e| e.fault.as_ref())
                            .and_then(|f| f.kind.clone())
                            .unwrap_or_else(|| "Unknown".into()),
                        message: err
                            .and_then(|e| e.localized_message.clone())
                            .unwrap_or_default(),
                    });
                }
                _ => {}
            }
            if start.elapsed() + delay > timeout {
                return Err(Error::TaskTimeout {
                    operation: operation.into(),
                    task: task.value.clone(),
                    state,
                    waited: timeout,
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(1));
            self.task_repolls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Whether look-ups are answered from listings.
    pub fn batched(&self) -> bool {
        !self.ttl.is_zero()
    }

    /// The VM a Node names in the current listing (a new one when `force`), or whether its
    /// absence is final (the listing was made by this call, or
    /// look-ups are not batched and `SearchIndex` said so).
    pub async fn find_listed(&self, key: Key<'_>, force: bool) -> Result<Found> {
        if !self.batched() {
            return Ok(self
                .discover(key)
                .await?
                .map_or(Found::Absent, |vm| Found::Vm(Box::new(vm))));
        }
        let (snap, fresh) = self.snapshot(force).await?;
        Ok(match snap.find(key) {
            Some(vm) => Found::Vm(Box::new(vm.clone())),
            None if fresh => Found::Absent,
            None => Found::NotInCachedListing,
        })
    }

    /// The current listing (`fresh`: made by this call).
    pub async fn snapshot(&self, force: bool) -> Result<(Arc<Snapshot>, bool)> {
        let mut slot = self.snapshot.lock().await;
        if let Some((at, snap)) = slot.as_ref() {
            if !force && at.elapsed() < self.ttl {
                return Ok((snap.clone(), false));
            }
        }
        let mut vms = Vec::new();
        for scope in self.scopes().await? {
            let objs = self
                .list_view(&scope, "VirtualMachine", &VM_PROPERTIES)
                .await?;
            vms.extend(objs.iter().map(|o| Vm::from_content(self.index, o)));
        }
        let snap = Arc::new(Snapshot::new(vms));
        tracing::debug!(vms = snap.len(), "listed every VM in scope");
        *slot = Some((Instant::now(), snap.clone()));
        Ok((snap, true))
    }

    /// Forgets the listing and the tag caches.
    pub async fn invalidate(&self) {
        *self.snapshot.lock().await = None;
        self.attached.lock().await.clear();
        self.ancestry.lock().await.clear();
    }

    /// Every object of `kind` under `container` with `paths`: one container view (kept per
    /// session) and one paged `RetrievePropertiesEx`.
    async fn list_view(
        &self,
        container: &Moref,
        kind: &str,
        paths: &[&str],
    ) -> Result<Vec<ObjectContent>> {
        let view_key = format!("{}/{kind}", container.value);
        for attempt in 0..2 {
            let generation = self.client.ensure_session().await?;
            let view = {
                let views = self.views.lock().await;
                views
                    .get(&view_key)
                    .filter(|(g, _)| *g == generation)
                    .map(|(_, v)| v.clone())
            };
            let view = match view {
                Some(v) => v,
                None => {
                    let c = container.clone();
                    let k = kind.to_owned();
                    let v = self
                        .client
                        .call(|sc| {
                            let vm = sc
                                .view_manager
                                .clone()
                                .ok_or_else(|| missing("viewManager"))?;
                            Ok(soap::CreateContainerView::new(
                                vm,
                                c.clone(),
                                vec![k.clone()],
                                true,
                            ))
                        })
                        .await?;
                    let generation = self.client.generation().await;
                    self.views
                        .lock()
                        .await
                        .insert(view_key.clone(), (generation, v.clone()));
                    v
                }
            };
            let spec = PropertyFilterSpec {
                prop_set: vec![PropertySpec {
                    kind: kind.into(),
                    path_set: paths.iter().map(|p| (*p).to_owned()).collect(),
                }],
                object_set: vec![ObjectSpec {
                    obj: view,
                    skip: true,
                    select_set: vec![Selection::traversal(
                        "view",
                        "ContainerView",
                        "view",
                        false,
                        &[],
                    )],
                }],
            };
            match self.retrieve(spec).await {
                // A view of an earlier session (the session expired between the two calls).
                Err(Error::Fault { fault, .. })
                    if attempt == 0 && fault == "ManagedObjectNotFound" =>
                {
                    self.views.lock().await.remove(&view_key);
                }
                other => return other,
            }
        }
        Err(missing("a container view that stays valid"))
    }

    /// `RetrievePropertiesEx` and its `ContinueRetrievePropertiesEx` pages.
    async fn retrieve(&self, spec: PropertyFilterSpec) -> Result<Vec<ObjectContent>> {
        let mut out = Vec::new();
        let first = self
            .client
            .call(|sc| {
                Ok(soap::RetrievePropertiesEx::new(
                    sc.property_collector.clone(),
                    spec.clone(),
                    RetrieveOptions {
                        max_objects: Some(PAGE),
                    },
                ))
            })
            .await?;
        let mut page = first;
        let mut pager = Pager::new("vim25", "ContinueRetrievePropertiesEx");
        while let Some(r) = page.take() {
            out.extend(r.objects);
            let Some(token) = pager.next(r.token.as_deref())? else {
                break;
            };
            page = self
                .client
                .call(|sc| {
                    Ok(soap::ContinueRetrievePropertiesEx::new(
                        sc.property_collector.clone(),
                        token.clone(),
                    ))
                })
                .await?;
        }
        Ok(out)
    }

    /// Per-node discovery through `SearchIndex`, as upstream does it.
    async fn discover(&self, key: Key<'_>) -> Result<Option<Vm>> {
        let Some(moref) = self.search(key).await? else {
            return Ok(None);
        };
        let objs = self
            .retrieve(PropertyFilterSpec {
                prop_set: vec![PropertySpec {
                    kind: "VirtualMachine".into(),
                    path_set: VM_PROPERTIES.iter().map(|p| (*p).to_owned()).collect(),
                }],
                object_set: vec![ObjectSpec {
                    obj: moref,
                    skip: false,
                    select_set: Vec::new(),
                }],
            })
            .await;
        match objs {
            Ok(objs) => Ok(objs.first().map(|o| Vm::from_content(self.index, o))),
            // Deleted between the search and the read.
            Err(Error::Fault { fault, .. }) if fault == "ManagedObjectNotFound" => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The VM reference for `key` from `SearchIndex`, in each datacenter in scope.
    pub async fn search(&self, key: Key<'_>) -> Result<Option<Moref>> {
        let dcs = self.containers.lock().await.clone();
        let dcs: Vec<Option<Moref>> = if dcs.is_empty() {
            vec![None]
        } else {
            dcs.into_iter().map(Some).collect()
        };
        for dc in dcs {
            let found = match key {
                Key::Uuid(u) => {
                    let mut found = None;
                    let lower = u.to_lowercase();
                    for candidate in std::iter::once(lower.clone()).chain(swapped_uuid(&lower)) {
                        found = match &dc {
                            Some(dc) => {
                                let dc = dc.clone();
                                self.client
                                    .call(|sc| {
                                        Ok(soap::FindByUuid::new(
                                            search_index(sc)?,
                                            Some(dc.clone()),
                                            candidate.clone(),
                                            true,
                                        ))
                                    })
                                    .await?
                            }
                            // vCenter-wide, where two datacenters may hold VMs with one UUID
                            // (clones): say so instead of picking one silently.
                            None => {
                                let all = self
                                    .client
                                    .call(|sc| {
                                        Ok(soap::FindAllByUuid::new(
                                            search_index(sc)?,
                                            None,
                                            candidate.clone(),
                                            true,
                                        ))
                                    })
                                    .await?;
                                if all.len() > 1 {
                                    tracing::warn!(uuid = %candidate, count = all.len(), "several VMs share one BIOS UUID; using the first");
                                }
                                all.into_iter().next()
                            }
                        };
                        if found.is_some() {
                            break;
                        }
                    }
                    found
                }
                Key::Name(n) => {
                    let name = n.to_owned();
                    let by_dns = self
                        .client
                        .call(|sc| {
                            Ok(soap::FindByDnsName::new(
                                search_index(sc)?,
                                dc.clone(),
                                name.clone(),
                                true,
                            ))
                        })
                        .await?;
                    match by_dns {
                        Some(m) => Some(m),
                        None if n.parse::<IpAddr>().is_ok() => {
                            self.client
                                .call(|sc| {
                                    Ok(soap::FindByIp::new(
                                        search_index(sc)?,
                                        dc.clone(),
                                        name.clone(),
                                        true,
                                    ))
                                })
                                .await?
                        }
                        None => self.find_by_vm_name(dc.as_ref(), n).await?,
                    }
                }
            };
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// `<datacenter>/vm/<name>`: a VM in the datacenter's top VM folder, by inventory name.
    async fn find_by_vm_name(&self, dc: Option<&Moref>, name: &str) -> Result<Option<Moref>> {
        let dc_names: Vec<String> = match dc {
            Some(_) => self.client.vcenter().datacenters.clone(),
            None => self.datacenter_names().await?,
        };
        for dc_name in dc_names {
            let r = self.find_by_path(&format!("{dc_name}/vm/{name}")).await?;
            if let Some(m) = r.filter(|m| m.kind == "VirtualMachine") {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// The host's ancestry, nearest first: host, cluster/compute resource, folders,
    /// datacenter, ... (one `RetrievePropertiesEx` following `parent`).
    pub async fn ancestry(&self, host: &str) -> Result<Vec<Moref>> {
        if let Some((at, chain)) = self.ancestry.lock().await.get(host) {
            if at.elapsed() < self.tag_ttl {
                return Ok(chain.clone());
            }
        }
        const KINDS: [&str; 5] = [
            "HostSystem",
            "ComputeResource",
            "ClusterComputeResource",
            "Folder",
            "Datacenter",
        ];
        let names: Vec<String> = KINDS.iter().map(|k| format!("up-{k}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let spec = PropertyFilterSpec {
            prop_set: KINDS
                .iter()
                .map(|k| PropertySpec {
                    kind: (*k).into(),
                    path_set: vec!["parent".into()],
                })
                .collect(),
            object_set: vec![ObjectSpec {
                obj: Moref::new("HostSystem", host),
                skip: false,
                select_set: KINDS
                    .iter()
                    .zip(&names)
                    .map(|(k, n)| Selection::traversal(n, k, "parent", false, &refs))
                    .collect(),
            }],
        };
        let objs = self.retrieve(spec).await?;
        let by_id: BTreeMap<&str, &ObjectContent> =
            objs.iter().map(|o| (o.obj.value.as_str(), o)).collect();
        let mut chain = Vec::new();
        let mut cur = Some(host.to_owned());
        while let Some(id) = cur.take() {
            let Some(o) = by_id.get(id.as_str()) else {
                break;
            };
            if chain.iter().any(|m: &Moref| m.value == id) {
                break;
            }
            chain.push(o.obj.clone());
            cur = o.text("parent").map(str::to_owned);
        }
        self.ancestry
            .lock()
            .await
            .insert(host.to_owned(), (Instant::now(), chain.clone()));
        Ok(chain)
    }

    /// Tags attached to each object (one `list-attached-tags-on-objects` for those not
    /// cached), resolved to names and category names.
    pub async fn tags_of(&self, objects: &[Moref]) -> Result<HashMap<String, Vec<Tag>>> {
        let mut ids: HashMap<String, Vec<String>> = HashMap::new();
        let mut missing_objs = Vec::new();
        {
            let cache = self.attached.lock().await;
            for o in objects {
                match cache.get(&o.value) {
                    Some((at, t)) if at.elapsed() < self.tag_ttl => {
                        ids.insert(o.value.clone(), t.clone());
                    }
                    _ => missing_objs.push(ObjectId {
                        id: o.value.clone(),
                        kind: o.kind.clone(),
                    }),
                }
            }
        }
        if !missing_objs.is_empty() {
            let answer: Vec<AttachedTags> = self
                .client
                .rest(
                    "/rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags-on-objects",
                    Some(&ObjectIds {
                        object_ids: &missing_objs,
                    }),
                )
                .await?;
            let mut cache = self.attached.lock().await;
            for o in &missing_objs {
                let t = answer
                    .iter()
                    .find(|a| a.object_id.id == o.id)
                    .and_then(|a| a.tag_ids.clone())
                    .unwrap_or_default();
                cache.insert(o.id.clone(), (Instant::now(), t.clone()));
                ids.insert(o.id.clone(), t);
            }
        }
        let mut out = HashMap::new();
        for (obj, tag_ids) in ids {
            let mut tags = Vec::new();
            for id in tag_ids {
                tags.push(self.tag(&id).await?);
            }
            out.insert(obj, tags);
        }
        Ok(out)
    }

    async fn tag(&self, id: &str) -> Result<Tag> {
        if let Some(t) = self.tags.lock().await.get(id) {
            return Ok(t.clone());
        }
        let t: TagJson = self
            .client
            .rest::<_, ()>(&format!("/rest/com/vmware/cis/tagging/tag/id:{id}"), None)
            .await?;
        let cached = self.categories.lock().await.get(&t.category_id).cloned();
        let category = match cached {
            Some(c) => c,
            None => {
                let c: CategoryJson = self
                    .client
                    .rest::<_, ()>(
                        &format!("/rest/com/vmware/cis/tagging/category/id:{}", t.category_id),
                        None,
                    )
                    .await?;
                self.categories
                    .lock()
                    .await
                    .insert(t.category_id.clone(), c.name.clone());
                c.name
            }
        };
        let tag = Tag {
            name: t.name,
            category,
        };
        self.tags.lock().await.insert(id.to_owned(), tag.clone());
        Ok(tag)
    }
}

fn search_index(sc: &soap::ServiceContent) -> Result<Moref> {
    sc.search_index
        .clone()
        .ok_or_else(|| missing("searchIndex"))
}

fn missing(what: &str) -> Error {
    Error::Decode {
        operation: "RetrieveServiceContent".into(),
        status: 200,
        message: format!("vCenter offers no {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(name: &str, uuid: &str, host: &str, ip: &str) -> Vm {
        Vm {
            name: name.into(),
            uuid: uuid.into(),
            hostname: host.into(),
            nics: vec![GuestNicInfo {
                ip_address: vec![ip.into()],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn snapshot_finds_by_name_dns_ip_and_either_uuid_form() {
        let s = Snapshot::new(vec![
            vm(
                "vm-a",
                "42301234-5678-9abc-def0-123456789abc",
                "node-a",
                "10.0.0.1",
            ),
            vm(
                "node-a",
                "00000000-0000-0000-0000-000000000002",
                "other",
                "10.0.0.2",
            ),
        ]);
        // A VM's own name wins over another VM's guest DNS name.
        assert_eq!(
            s.find(Key::Name("node-a")).map(|v| v.name.as_str()),
            Some("node-a")
        );
        assert_eq!(
            s.find(Key::Name("10.0.0.1")).map(|v| v.name.as_str()),
            Some("vm-a")
        );
        assert_eq!(
            s.find(Key::Name("other")).map(|v| v.name.as_str()),
            Some("node-a")
        );
        let u = "42301234-5678-9abc-def0-123456789ABC";
        assert_eq!(s.find(Key::Uuid(u)).map(|v| v.name.as_str()), Some("vm-a"));
        let swapped = swapped_uuid("42301234-5678-9abc-def0-123456789abc").expect("uuid");
        assert_eq!(swapped, "34123042-7856-bc9a-def0-123456789abc");
        assert_eq!(
            s.find(Key::Uuid(&swapped)).map(|v| v.name.as_str()),
            Some("vm-a")
        );
        assert!(s.find(Key::Name("nope")).is_none());
        assert_eq!(s.len(), 2);
    }
}
