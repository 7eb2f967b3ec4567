//! A rate-limited work queue with upstream semantics (`k8s.io/client-go/util/workqueue`): a
//! key is queued at most once, never processed by two workers at a time (re-added while being
//! processed, it runs again afterwards), and failed keys come back after a per-item
//! exponential backoff that `forget` resets.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::metrics::Metrics;

/// What a reconcile asks for next (kube-runtime's `Action`, whose delay we need to read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the object changes.
    AwaitChange,
    /// Look again after this long.
    Requeue(Duration),
}

impl Action {
    /// How long a worker waits before the key comes back; `None`: until the object changes.
    pub fn delay(self) -> Option<Duration> {
        match self {
            Action::AwaitChange => None,
            Action::Requeue(d) => Some(d),
        }
    }
}

/// A queue's per-item backoff: a failed key comes back after `base * 2^failures`, at most
/// `max` (upstream `ItemExponentialFailureRateLimiter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// The first delay.
    pub base: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// Upstream's `DefaultControllerRateLimiter`: 5ms doubling to 1000s per item.
    pub const DEFAULT_CONTROLLER: Self = Self {
        base: Duration::from_millis(5),
        max: Duration::from_secs(1000),
    };
    /// The volume controllers' (upstream `exponentialbackoff` of volume operations): 100ms
    /// doubling to 5 minutes.
    pub const VOLUME: Self = Self {
        base: Duration::from_millis(100),
        max: Duration::from_secs(300),
    };
    /// Upstream's service rate limiter: 5s doubling to 300s per item.
    pub const SERVICE: Self = Self {
        base: Duration::from_secs(5),
        max: Duration::from_secs(300),
    };
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<String>,
    /// Queued (waiting) keys, with when they were added.
    dirty: HashMap<String, Instant>,
    /// Keys being processed, with when their processing started.
    processing: HashMap<String, Instant>,
    failures: HashMap<String, u32>,
    shutdown: bool,
}

/// The queue; cheap to share behind an `Arc`.
pub(crate) struct Queue {
    name: &'static str,
    inner: Mutex<Inner>,
    ready: Notify,
    base_delay: Duration,
    max_delay: Duration,
    metrics: Metrics,
}

impl Queue {
    /// A queue named `name` (the metrics' `name` label) whose failed items come back after
    /// `backoff`.
    pub fn new(name: &'static str, backoff: Backoff, metrics: Metrics) -> Arc<Self> {
        Arc::new(Self {
            name,
            inner: Mutex::new(Inner::default()),
            ready: Notify::new(),
            base_delay: backoff.base,
            max_delay: backoff.max,
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: String) {
        let mut st = self.lock();
        if st.shutdown || st.dirty.contains_key(&key) {
            return;
        }
        self.metrics.adds.with_label_values(&[self.name]).inc();
        st.dirty.insert(key.clone(), Instant::now());
        if st.processing.contains_key(&key) {
            // `done` queues it again.
            return;
        }
        st.queue.push_back(key);
        self.metrics
            .depth
            .with_label_values(&[self.name])
            .set(st.queue.len() as i64);
        drop(st);
        self.ready.notify_one();
    }

    /// Queues `key` after `delay`.
    pub fn add_after(self: &Arc<Self>, key: String, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let q = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(q) = q.upgrade() {
                q.add(key);
            }
        });
    }

    /// Counts a failure of `key` and returns how long to wait before retrying it.
    pub fn backoff(&self, key: &str) -> Duration {
        let mut st = self.lock();
        let n = st.failures.entry(key.to_string()).or_insert(0);
        let exp = (*n).min(30);
        *n = n.saturating_add(1);
        self.metrics.retries.with_label_values(&[self.name]).inc();
        self.base_delay
            .checked_mul(1u32 << exp)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// Resets the backoff of `key`.
    pub fn forget(&self, key: &str) {
        self.lock().failures.remove(key);
    }

    /// What a worker does with `key` after its reconcile returned `result`: a success resets
    /// the key's backoff and follows the returned action; a failure follows `on_error` (which
    /// usually counts it with [`Queue::backoff`]).
    pub fn settle<E>(
        &self,
        key: &str,
        result: Result<Action, E>,
        on_error: impl FnOnce(E) -> Action,
    ) -> Option<Duration> {
        match result {
            Ok(action) => {
                self.forget(key);
                action.delay()
            }
            Err(e) => on_error(e).delay(),
        }
    }

    /// Waits for the next key; `None` once shut down.
    pub async fn get(&self) -> Option<String> {
        loop {
            let notified = self.ready.notified();
            {
                let mut st = self.lock();
                if st.shutdown {
                    return None;
                }
                if let Some(key) = st.queue.pop_front() {
                    if let Some(added) = st.dirty.remove(&key) {
                        self.metrics
                            .queue_duration
                            .with_label_values(&[self.name])
                            .observe(added.elapsed().as_secs_f64());
                    }
                    st.processing.insert(key.clone(), Instant::now());
                    self.metrics
                        .depth
                        .with_label_values(&[self.name])
                        .set(st.queue.len() as i64);
                    if !st.queue.is_empty() {
                        // Wake another worker for the rest.
                        self.ready.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Marks `key` processed; queues it again if it was added meanwhile.
    pub fn done(&self, key: &str) {
        let mut st = self.lock();
        st.processing.remove(key);
        if st.dirty.contains_key(key) {
            st.queue.push_back(key.to_string());
            drop(st);
            self.ready.notify_one();
        }
    }

    /// Updates `workqueue_unfinished_work_seconds` and
    /// `workqueue_longest_running_processor_seconds` (upstream samples every 500ms).
    fn update_unfinished(&self) {
        let st = self.lock();
        let ages = st.processing.values().map(|t| t.elapsed().as_secs_f64());
        let (sum, max) = ages.fold((0.0, 0.0f64), |(s, m), a| (s + a, m.max(a)));
        drop(st);
        self.metrics
            .unfinished
            .with_label_values(&[self.name])
            .set(sum);
        self.metrics
            .longest_running
            .with_label_values(&[self.name])
            .set(max);
    }

    /// Stops handing out keys.
    #[cfg(test)]
    pub fn shut_down(&self) {
        self.lock().shutdown = true;
        self.ready.notify_waiters();
    }

    /// Keys waiting (for tests and logs).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }
}

/// Runs `workers` workers that each take keys from `queue` and run `process` on them, until
/// the queue shuts down. `process` returns what to do with the key next.
pub(crate) async fn run_workers<F, Fut>(queue: Arc<Queue>, workers: u32, process: F)
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<Duration>> + Send,
{
    let process = Arc::new(process);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let queue = queue.clone();
        let process = process.clone();
        set.spawn(async move {
            while let Some(key) = queue.get().await {
                let start = Instant::now();
                let next = process(key.clone()).await;
                queue
                    .metrics
                    .work_duration
                    .with_label_values(&[queue.name])
                    .observe(start.elapsed().as_secs_f64());
                queue.done(&key);
                if let Some(delay) = next {
                    queue.add_after(key, delay);
                }
            }
        });
    }
    let sampler = {
        let queue = queue.clone();
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tick.tick().await;
                queue.update_unfinished();
            }
        }
    };
    tokio::select! {
        () = async { while set.join_next().await.is_some() {} } => {}
        () = sampler => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> Arc<Queue> {
        let m = Metrics::new(&prometheus::Registry::new()).expect("metrics");
        let backoff = Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1),
        };
        Queue::new("test", backoff, m)
    }

    #[tokio::test]
    async fn dedups_and_requeues_keys_added_while_processing() {
        let q = queue();
        q.add("a".into());
        q.add("a".into());
        q.add("b".into());
        assert_eq!(q.len(), 2);
        let k = q.get().await.expect("key");
        assert_eq!(k, "a");
        q.add("a".into());
        assert_eq!(q.len(), 1, "a is being processed: not queued twice");
        q.update_unfinished();
        let m = &q.metrics;
        assert!(m.unfinished.with_label_values(&["test"]).get() >= 0.0);
        q.done("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await.as_deref(), Some("b"));
        assert_eq!(q.get().await.as_deref(), Some("a"));
    }

    #[test]
    fn backoff_doubles_up_to_max_and_forget_resets() {
        let q = queue();
        assert_eq!(q.backoff("a"), Duration::from_millis(5));
        assert_eq!(q.backoff("a"), Duration::from_millis(10));
        assert_eq!(q.backoff("a"), Duration::from_millis(20));
        for _ in 0..40 {
            q.backoff("a");
        }
        assert_eq!(q.backoff("a"), Duration::from_secs(1));
        q.forget("a");
        assert_eq!(q.backoff("a"), Duration::from_millis(5));
        assert_eq!(q.backoff("b"), Duration::from_millis(5));
    }

    #[tokio::test]
    async fn shutdown_releases_workers() {
        let q = queue();
        let q2 = q.clone();
        let h = tokio::spawn(async move { q2.get().await });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(h.await.expect("join"), None);
    }
}
