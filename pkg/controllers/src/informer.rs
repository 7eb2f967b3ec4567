//! One shared cache per resource type per process (upstream `SharedInformerFactory`): a
//! kube-runtime watcher feeding a reflector [`Store`], with managedFields stripped before
//! caching, and a broadcast of changes that every interested controller subscribes to.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{broadcast, watch};

use crate::queue::Queue;

/// What changed in a cache.
#[derive(Debug)]
pub(crate) enum Notice<K> {
    /// Added (`old` is `None`) or modified.
    Applied {
        /// The cached object before this event.
        old: Option<Arc<K>>,
        /// The object now cached.
        new: Arc<K>,
    },
    /// Deleted; the last cached state.
    Deleted(Arc<K>),
    /// The cache was (re)listed, or a subscriber fell behind: look at everything again.
    Resync,
}

impl<K> Clone for Notice<K> {
    fn clone(&self) -> Self {
        match self {
            Notice::Applied { old, new } => Notice::Applied {
                old: old.clone(),
                new: new.clone(),
            },
            Notice::Deleted(o) => Notice::Deleted(o.clone()),
            Notice::Resync => Notice::Resync,
        }
    }
}

/// Periodic resync (`--min-resync-period`): every subscriber is told to look at everything
/// again, upstream's informer resync. As upstream's `ResyncPeriod`, the period is random
/// between the minimum and twice it, chosen once per informer, so the caches of one process
/// do not all resync at once; a zero minimum turns resync off.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resync {
    min: std::time::Duration,
}

impl Resync {
    pub(crate) fn new(min: std::time::Duration) -> Self {
        Self { min }
    }

    /// A period in `[min, 2 x min)`, or `None` for no resync.
    pub(crate) fn period(&self) -> Option<std::time::Duration> {
        if self.min.is_zero() {
            return None;
        }
        let factor = 1.0 + fastrand::f64();
        Some(
            std::time::Duration::try_from_secs_f64(self.min.as_secs_f64() * factor)
                .unwrap_or(self.min),
        )
    }
}

/// Completes at `at`, never when `None`.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A cache and its change feed.
pub(crate) struct Informer<K: Resource<DynamicType = ()> + 'static> {
    /// Read side of the cache.
    pub store: Store<K>,
    tx: broadcast::Sender<Notice<K>>,
    /// True once the first full list is in the store. Our own flag rather than
    /// `Store::wait_until_ready`: with several controllers waiting on one store, only one of
    /// them was woken.
    ready: watch::Receiver<bool>,
    /// Counts the changes applied to the store: equal counts, same contents (lets readers
    /// keep what they derived from the store until it changes).
    changes: Arc<AtomicU64>,
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts watching `api` with `config` in a background task, which ends when the returned
    /// informer and all its subscribers are dropped... or with the runtime; callers abort it.
    /// `strip` removes fields no controller reads before caching; `resync` says how often
    /// subscribers get a [`Notice::Resync`] besides the changes.
    pub fn start(
        api: Api<K>,
        config: watcher::Config,
        strip: fn(&mut K),
        resync: Resync,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let (store, mut writer) = reflector::store::<K>();
        // Large enough for bursts of node registrations; a subscriber that lags resyncs.
        let (tx, _) = broadcast::channel(4096);
        let (ready_tx, ready) = watch::channel(false);
        let changes = Arc::new(AtomicU64::new(0));
        let informer = Arc::new(Self {
            store: store.clone(),
            tx: tx.clone(),
            ready,
            changes: changes.clone(),
        });
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config)
                .default_backoff()
                .modify(|o: &mut K| {
                    // Controllers never read managedFields; they are most of a Node's size.
                    o.managed_fields_mut().clear();
                    strip(o);
                })
                .boxed();
            let period = resync.period();
            let next_resync = || period.map(|p| tokio::time::Instant::now() + p);
            let mut resync_at = next_resync();
            loop {
                let event = tokio::select! {
                    e = stream.next() => match e {
                        Some(e) => e,
                        None => break,
                    },
                    () = sleep_until(resync_at) => {
                        resync_at = next_resync();
                        tracing::debug!(kind = %K::kind(&()), "resync");
                        let _ = tx.send(Notice::Resync);
                        continue;
                    }
                };
                let event = match event {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(error = %e, kind = %K::kind(&()), "watch failed; retrying");
                        continue;
                    }
                };
                // The object an Apply replaces, read before the store takes the new one.
                let applied = match &event {
                    watcher::Event::Apply(o) => {
                        let key = ObjectRef::from_obj(o);
                        let old = store.get(&key);
                        Some((key, old))
                    }
                    _ => None,
                };
                writer.apply_watcher_event(&event);
                let notice = match (&event, applied) {
                    // Read back from the store, which holds the object in an `Arc` already:
                    // subscribers share that copy instead of another clone.
                    (watcher::Event::Apply(o), Some((key, old))) => Some(Notice::Applied {
                        old,
                        new: store.get(&key).unwrap_or_else(|| Arc::new(o.clone())),
                    }),
                    (watcher::Event::Delete(o), _) => Some(Notice::Deleted(Arc::new(o.clone()))),
                    (watcher::Event::InitDone, _) => Some(Notice::Resync),
                    _ => None,
                };
                changes.fetch_add(1, Ordering::Release);
                if matches!(event, watcher::Event::InitDone) {
                    ready_tx.send_replace(true);
                }
                if let Some(n) = notice {
                    // No subscriber yet is fine: they resync from the store when they start.
                    let _ = tx.send(n);
                }
            }
        });
        (informer, task)
    }

    /// A ready cache holding `objects`, with no watch behind it (reconcile-level tests).
    #[cfg(test)]
    pub fn fixed(objects: Vec<K>) -> Arc<Self> {
        let (store, mut writer) = reflector::store::<K>();
        writer.apply_watcher_event(&watcher::Event::Init);
        for o in objects {
            writer.apply_watcher_event(&watcher::Event::InitApply(o));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let (tx, _) = broadcast::channel(16);
        let (_, ready) = watch::channel(true);
        Arc::new(Self {
            store,
            tx,
            ready,
            changes: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Counts a change without one (tests of what readers derive from the store).
    #[cfg(test)]
    pub fn touch(&self) {
        self.changes.fetch_add(1, Ordering::Release);
    }

    /// How many changes the store has taken so far.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// A feed of changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Notice<K>> {
        self.tx.subscribe()
    }

    /// Waits for the first full list (every waiter is woken).
    pub async fn ready(&self) {
        let mut ready = self.ready.clone();
        // Err only when the watch task ended; then there is nothing to wait for.
        let _ = ready.wait_for(|r| *r).await;
    }
}

/// Next notice of a feed; a lagged feed becomes a [`Notice::Resync`]; `None` when closed.
pub(crate) async fn next_notice<K>(rx: &mut broadcast::Receiver<Notice<K>>) -> Option<Notice<K>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    match rx.recv().await {
        Ok(n) => Some(n),
        Err(broadcast::error::RecvError::Lagged(missed)) => {
            tracing::warn!(
                kind = %K::kind(&()),
                missed,
                "a controller fell behind the cache's changes; it resyncs from the cache"
            );
            Some(Notice::Resync)
        }
        Err(broadcast::error::RecvError::Closed) => None,
    }
}

/// Queues the key of every object in `informer`'s cache, then follows `feed` (subscribed
/// before the cache was ready, so nothing is missed): an added or changed object is queued, a
/// resync queues them all again, and a deleted one goes to `on_deleted` (upstream's event
/// handlers that enqueue with `MetaNamespaceKeyFunc`).
pub(crate) async fn enqueue_changes<K>(
    informer: &Informer<K>,
    mut feed: broadcast::Receiver<Notice<K>>,
    queue: &Queue,
    mut on_deleted: impl FnMut(Arc<K>),
) where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let all = || {
        for o in informer.store.state() {
            queue.add(key_of(o.as_ref()));
        }
    };
    all();
    while let Some(notice) = next_notice(&mut feed).await {
        match notice {
            Notice::Applied { new, .. } => queue.add(key_of(new.as_ref())),
            Notice::Deleted(old) => on_deleted(old),
            Notice::Resync => all(),
        }
    }
}

/// `namespace/name` or `name`, the workqueue key of upstream `MetaNamespaceKeyFunc`.
pub(crate) fn key_of<K: Resource>(o: &K) -> String {
    match o.namespace() {
        Some(ns) => format!("{ns}/{}", o.name_any()),
        None => o.name_any(),
    }
}

/// Looks up a workqueue key in a store.
pub(crate) fn get_by_key<K>(store: &Store<K>, key: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let r = match key.split_once('/') {
        Some((ns, name)) => ObjectRef::new(name).within(ns),
        None => ObjectRef::new(key),
    };
    store.get(&r)
}

/// Runs `workers` workers over the Node keys of `queue`: each takes the Node from `nodes` (a
/// key whose Node is gone is dropped), reconciles it with `ctx`, and settles the key, a failure
/// through `error_policy` (the Node controllers' loop: cloud-node, node IPAM, the node manager).
pub(crate) async fn run_node_workers<C, F, Fut>(
    queue: Arc<Queue>,
    nodes: Arc<Informer<k8s_openapi::api::core::v1::Node>>,
    workers: u32,
    ctx: Arc<C>,
    reconcile: F,
    error_policy: fn(
        Arc<k8s_openapi::api::core::v1::Node>,
        &crate::Error,
        &Queue,
    ) -> crate::queue::Action,
) where
    C: Send + Sync + 'static,
    F: Fn(Arc<k8s_openapi::api::core::v1::Node>, Arc<C>) -> Fut + Copy + Send + Sync + 'static,
    Fut: std::future::Future<Output = crate::Result<crate::queue::Action>> + Send,
{
    let q = queue.clone();
    crate::queue::run_workers(queue, workers, move |key: String| {
        let (ctx, queue) = (ctx.clone(), q.clone());
        let node = get_by_key(&nodes.store, &key);
        async move {
            let node = node?;
            let result = reconcile(node.clone(), ctx).await;
            queue.settle(&key, result, |e| error_policy(node, &e, &queue))
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use std::time::Duration;

    #[test]
    fn resync_periods_are_between_min_and_twice_min() {
        let r = Resync::new(Duration::from_secs(10));
        let periods: Vec<Duration> = (0..200).filter_map(|_| r.period()).collect();
        assert_eq!(periods.len(), 200);
        assert!(periods
            .iter()
            .all(|p| *p >= Duration::from_secs(10) && *p < Duration::from_secs(20)));
        // Random, not one fixed value.
        assert!(periods.iter().any(|p| *p != periods[0]));
        assert_eq!(Resync::new(Duration::ZERO).period(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn subscribers_are_told_to_resync_each_period() {
        // Never contacted successfully: the watch keeps failing and retrying; resync is
        // independent of it.
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("url"),
        ))
        .expect("client");
        let (informer, task) = Informer::<Node>::start(
            Api::all(client),
            watcher::Config::default(),
            |_| {},
            Resync::new(Duration::from_secs(3600)),
        );
        let mut rx = informer.subscribe();
        let start = tokio::time::Instant::now();
        let mut resyncs = Vec::new();
        while resyncs.len() < 3 {
            if let Some(Notice::Resync) = next_notice(&mut rx).await {
                resyncs.push(start.elapsed());
            }
        }
        task.abort();
        // One period, chosen once: the gaps are equal and within [1h, 2h).
        let first = resyncs[0];
        assert!(
            first >= Duration::from_secs(3600) && first < Duration::from_secs(7200),
            "{resyncs:?}"
        );
        for w in resyncs.windows(2) {
            let gap = w[1] - w[0];
            assert!(gap.abs_diff(first) < Duration::from_secs(1), "{resyncs:?}");
        }
    }
}
