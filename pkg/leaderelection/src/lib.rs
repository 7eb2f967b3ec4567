//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's
//! `tools/leaderelection` with the `LeaseLock` does it (upstream equivalent:
//! `k8s.io/client-go/tools/leaderelection.RunOrDie` as called by
//! `k8s.io/cloud-provider/app` and kube-controller-manager).
//!
//! Semantics kept from upstream:
//! - a candidate polls every retry period (jittered by 1.2 as `wait.JitterUntil`) and takes the
//!   Lease when it is free, released (empty holder) or not renewed for the lease duration *as
//!   observed on the local clock* (the record's `renewTime` is not trusted across clocks);
//! - every write carries the `resourceVersion` that was read (optimistic concurrency), so two
//!   candidates never both win: the loser gets a 409 and tries again later;
//! - the leader renews every retry period; if no renewal succeeds within the renew deadline
//!   it has lost leadership, stops its work and [`LeaderElector::run`] returns
//!   [`Error::LeadershipLost`] (the components exit non-zero, as upstream's `klog.Fatalf`);
//! - on shutdown (`ReleaseOnCancel`) the leader first stops its work, then releases the Lease
//!   (empty holder, `leaseDurationSeconds: 1`), so a standby takes over at its next retry;
//! - `leader_election_master_status{name}` is 1 while leading, 0 otherwise;
//! - [`Health::check`] is upstream's `HealthzAdaptor`: it fails when this process believes it
//!   leads but has not renewed for longer than the lease duration plus a grace period.
//!
//! One [`LeaderElector`] is one Lease. Leader migration (KEP-2436) runs a second elector on
//! the migration Lease inside the first one's `lead` future; [`migration`] reads its
//! configuration and decides which controllers run under which Lease.
//!
//! Start here: [`LeaderElector::run`], then [`Config`] (the durations) and [`migration`].
//!
//! Not here: what runs while leading (the caller's future; the controller managers' is in
//! `cmd/hypercloud/src/runtime.rs`), or any lock other than a Lease (no ConfigMap or Endpoints
//! locks).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hypercloud_cloudprovider::Chain;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;
use prometheus::{IntGaugeVec, Opts};
use tokio::sync::watch;

pub mod migration;

/// Upstream's `JitterFactor` for the acquire loop.
const JITTER_FACTOR: f64 = 1.2;
/// Upstream's healthz adaptor timeout (kube-controller-manager and the CCM use 20s).
const HEALTH_GRACE: Duration = Duration::from_secs(20);

/// Errors of leader election; each variant names the operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The leader could not renew its Lease within the renew deadline.
    #[error("leaderelection lost: lease {namespace}/{name} not renewed within {renew_deadline:?}")]
    LeadershipLost {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// `--leader-elect-renew-deadline`.
        renew_deadline: Duration,
    },
    /// Reading the Lease failed.
    #[error("getting lease {namespace}/{name}")]
    GetLease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Why.
        source: kube::Error,
    },
    /// Creating the Lease failed (other than someone else creating it first).
    #[error("creating lease {namespace}/{name}")]
    CreateLease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Why.
        source: kube::Error,
    },
    /// Updating the Lease failed (other than a resourceVersion conflict).
    #[error("updating lease {namespace}/{name}")]
    UpdateLease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Why.
        source: kube::Error,
    },
    /// The metric could not be registered.
    #[error("registering leader election metrics")]
    RegisterMetrics(#[from] prometheus::Error),
    /// The durations are inconsistent (upstream `NewLeaderElector` checks).
    #[error("invalid leader election config: {0}")]
    InvalidConfig(String),
    /// The `--leader-migration-config` file could not be read.
    #[error("--leader-migration-config: cannot read {}", path.display())]
    ReadMigrationConfig {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The `--leader-migration-config` file is not a `LeaderMigrationConfiguration` this
    /// version can decode.
    #[error("--leader-migration-config: {}: {message}", path.display())]
    DecodeMigrationConfig {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong, naming the field when one is at fault.
        message: String,
    },
    /// The `--leader-migration-config` file decoded but has invalid values.
    #[error("--leader-migration-config: {}: invalid LeaderMigrationConfiguration: {}", path.display(), errors.join("; "))]
    InvalidMigrationConfig {
        /// The file.
        path: std::path::PathBuf,
        /// Each problem as `field.path: what` (upstream `field.ErrorList`).
        errors: Vec<String>,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What to contend for, and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Lease name (`--leader-elect-resource-name`).
    pub name: String,
    /// Lease namespace (`--leader-elect-resource-namespace`).
    pub namespace: String,
    /// This candidate's identity; see [`default_identity`].
    pub identity: String,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
    /// Release the Lease on shutdown (upstream `ReleaseOnCancel`).
    pub release_on_cancel: bool,
}

impl Config {
    /// Upstream's `NewLeaderElector` checks.
    pub fn validate(&self) -> Result<()> {
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::InvalidConfig(
                "leaseDuration must be greater than renewDeadline".into(),
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(Error::InvalidConfig(
                "renewDeadline must be greater than retryPeriod*JitterFactor".into(),
            ));
        }
        if self.retry_period.is_zero() {
            return Err(Error::InvalidConfig(
                "retryPeriod must be greater than zero".into(),
            ));
        }
        if self.identity.is_empty() {
            return Err(Error::InvalidConfig("identity must not be empty".into()));
        }
        Ok(())
    }
}

/// `hostname_<uuid>`, the identity the upstream controller managers use.
pub fn default_identity() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// `leader_election_master_status{name}`: registered once per registry, shared by electors.
#[derive(Clone)]
pub struct Metrics {
    master_status: IntGaugeVec,
}

impl Metrics {
    /// Registers the gauge in `registry`.
    pub fn register(registry: &prometheus::Registry) -> Result<Self> {
        let master_status = IntGaugeVec::new(
            Opts::new(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ),
            &["name"],
        )?;
        registry.register(Box::new(master_status.clone()))?;
        Ok(Self { master_status })
    }
}

/// How this process stands in the election, for health checks and tests.
#[derive(Clone, Debug)]
pub struct Health {
    state: Arc<Mutex<HealthState>>,
    lease_duration: Duration,
}

#[derive(Debug, Default)]
struct HealthState {
    leading: bool,
    last_renew: Option<Instant>,
}

impl Health {
    /// Whether this process currently holds the Lease.
    pub fn is_leader(&self) -> bool {
        self.lock().leading
    }

    /// Upstream's `HealthzAdaptor.Check`: fine unless this process leads and has not renewed
    /// for longer than the lease duration plus 20s.
    pub fn check(&self) -> Result<(), String> {
        let s = self.lock();
        match (s.leading, s.last_renew) {
            (true, Some(t)) if t.elapsed() > self.lease_duration + HEALTH_GRACE => Err(format!(
                "failed election to renew leadership on lease: last renewed {:?} ago",
                t.elapsed()
            )),
            _ => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Handed to the `lead` future: completes when it must stop (shutdown or lost leadership).
#[derive(Clone, Debug)]
pub struct StopSignal(watch::Receiver<bool>);

impl StopSignal {
    /// Waits until the leader must stop its work.
    pub async fn stopped(mut self) {
        // An Err means the elector is gone, which also means stop.
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

impl From<watch::Receiver<bool>> for StopSignal {
    /// A signal that fires when the sender sends `true` (for running work without election).
    fn from(rx: watch::Receiver<bool>) -> Self {
        Self(rx)
    }
}

/// How [`LeaderElector::run`] ended without losing leadership.
#[derive(Debug, PartialEq)]
pub enum Outcome<T> {
    /// Shutdown came (before or while leading); any held Lease was released.
    Shutdown,
    /// The `lead` future returned on its own; the Lease was released.
    Finished(T),
}

/// The last Lease record this candidate saw, and when (local clock).
#[derive(Default)]
struct Observed {
    spec: Option<LeaseSpec>,
    time: Option<Instant>,
}

/// One candidate for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    config: Config,
    observed: Mutex<Observed>,
    health: Health,
    metrics: Option<Metrics>,
}

enum Leading<T> {
    Shutdown,
    Finished(T),
    Lost,
}

impl LeaderElector {
    /// A candidate using `client`; `metrics` gets `leader_election_master_status`.
    pub fn new(client: kube::Client, config: Config, metrics: Option<Metrics>) -> Result<Self> {
        config.validate()?;
        let api = Api::namespaced(client, &config.namespace);
        if let Some(m) = &metrics {
            m.master_status.with_label_values(&[&config.name]).set(0);
        }
        let health = Health {
            state: Arc::default(),
            lease_duration: config.lease_duration,
        };
        Ok(Self {
            api,
            config,
            observed: Mutex::default(),
            health,
            metrics,
        })
    }

    /// A handle on this candidate's standing, for `/healthz`.
    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Contends for the Lease until acquired, then runs `lead` while renewing it. `lead` gets
    /// a [`StopSignal`] that fires on shutdown or lost leadership.
    ///
    /// - `shutdown` completes → the work is told to stop and awaited (at most the lease
    ///   duration), then the Lease is released: `Ok(Outcome::Shutdown)`;
    /// - `lead` returns → the Lease is released: `Ok(Outcome::Finished(value))`;
    /// - renewal fails for the renew deadline → the work is told to stop and dropped:
    ///   `Err(Error::LeadershipLost)`.
    pub async fn run<T, F, Fut>(
        &self,
        shutdown: impl Future<Output = ()>,
        lead: F,
    ) -> Result<Outcome<T>>
    where
        F: FnOnce(StopSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        let cfg = &self.config;
        tokio::pin!(shutdown);
        tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.name), identity = %cfg.identity, "attempting to acquire leader lease");
        loop {
            let acquired = tokio::select! {
                _ = &mut shutdown => return Ok(Outcome::Shutdown),
                r = self.try_acquire_or_renew() => r,
            };
            match acquired {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %Chain(&e), "error retrieving resource lock"),
            }
            let jitter = cfg
                .retry_period
                .mul_f64(1.0 + fastrand::f64() * JITTER_FACTOR);
            tokio::select! {
                _ = &mut shutdown => return Ok(Outcome::Shutdown),
                _ = tokio::time::sleep(jitter) => {}
            }
        }
        tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.name), identity = %cfg.identity, "successfully acquired lease");
        self.set_leading(true);

        let (stop_tx, stop_rx) = watch::channel(false);
        let work = lead(StopSignal(stop_rx));
        tokio::pin!(work);
        let ended = self.lead_and_renew(&mut shutdown, &mut work).await;
        match ended {
            Leading::Lost => {
                let _ = stop_tx.send(true);
                self.set_leading(false);
                tracing::error!(lease = %cfg.name, "leaderelection lost");
                Err(Error::LeadershipLost {
                    namespace: cfg.namespace.clone(),
                    name: cfg.name.clone(),
                    renew_deadline: cfg.renew_deadline,
                })
            }
            Leading::Shutdown => {
                let _ = stop_tx.send(true);
                // Release only once the work has stopped, so no two leaders act at once.
                if tokio::time::timeout(cfg.lease_duration, &mut work)
                    .await
                    .is_err()
                {
                    tracing::warn!(lease = %cfg.name, "work did not stop within the lease duration; releasing anyway");
                }
                self.release_if_configured().await;
                Ok(Outcome::Shutdown)
            }
            Leading::Finished(v) => {
                self.release_if_configured().await;
                Ok(Outcome::Finished(v))
            }
        }
    }

    async fn lead_and_renew<T>(
        &self,
        shutdown: &mut (impl Future<Output = ()> + Unpin),
        work: &mut (impl Future<Output = T> + Unpin),
    ) -> Leading<T> {
        let cfg = &self.config;
        // Upstream: each renewal round polls every retry period until it succeeds or the renew
        // deadline (counted from the round's start) passes.
        let mut round_start = Instant::now() + cfg.retry_period;
        loop {
            tokio::select! {
                _ = &mut *shutdown => return Leading::Shutdown,
                v = &mut *work => return Leading::Finished(v),
                _ = tokio::time::sleep(cfg.retry_period) => {}
            }
            let left = cfg.renew_deadline.saturating_sub(round_start.elapsed());
            let renewed = tokio::select! {
                _ = &mut *shutdown => return Leading::Shutdown,
                v = &mut *work => return Leading::Finished(v),
                r = tokio::time::timeout(left.max(Duration::from_millis(1)), self.try_acquire_or_renew()) => r,
            };
            match renewed {
                Ok(Ok(true)) => {
                    round_start = Instant::now() + cfg.retry_period;
                    continue;
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(lease = %cfg.name, error = %Chain(&e), "failed to renew lease")
                }
                Err(_) => tracing::warn!(lease = %cfg.name, "renewing lease timed out"),
            }
            if round_start.elapsed() >= cfg.renew_deadline {
                return Leading::Lost;
            }
        }
    }

    fn set_leading(&self, leading: bool) {
        {
            let mut s = self.health.lock();
            s.leading = leading;
            s.last_renew = leading.then(Instant::now);
        }
        if let Some(m) = &self.metrics {
            m.master_status
                .with_label_values(&[&self.config.name])
                .set(i64::from(leading));
        }
    }

    fn observe(&self, spec: &LeaseSpec) {
        let mut o = self.observed.lock().unwrap_or_else(|p| p.into_inner());
        if o.spec.as_ref() != Some(spec) {
            let new_holder = spec.holder_identity.as_deref().unwrap_or("");
            let old_holder = o
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                .unwrap_or("");
            if new_holder != old_holder && !new_holder.is_empty() {
                tracing::info!(lease = %self.config.name, leader = %new_holder, "new leader elected");
            }
            o.spec = Some(spec.clone());
            o.time = Some(Instant::now());
        }
    }

    fn record(&self, old: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        let me = old
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| h == self.config.identity);
        let transitions = old.and_then(|s| s.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: if me {
                old.and_then(|s| s.acquire_time.clone())
                    .or(Some(now.clone()))
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if me || old.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..Default::default()
        }
    }

    /// The Lease as the apiserver has it, `None` when there is none.
    async fn get_lease(&self) -> Result<Option<Lease>> {
        let cfg = &self.config;
        self.api
            .get_opt(&cfg.name)
            .await
            .map_err(|source| Error::GetLease {
                namespace: cfg.namespace.clone(),
                name: cfg.name.clone(),
                source,
            })
    }

    /// One attempt (upstream `tryAcquireOrRenew`): `Ok(true)` when this candidate holds the
    /// Lease afterwards, `Ok(false)` when someone else does or a concurrent write won.
    pub async fn try_acquire_or_renew(&self) -> Result<bool> {
        let cfg = &self.config;
        let existing = self.get_lease().await?;
        let Some(lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.record(None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created.spec.unwrap_or_default());
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(source) => Err(Error::CreateLease {
                    namespace: cfg.namespace.clone(),
                    name: cfg.name.clone(),
                    source,
                }),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observe(&spec);
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        let held_by_other = !holder.is_empty() && holder != cfg.identity;
        if held_by_other {
            let duration = Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            );
            let observed_at = self
                .observed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .time
                .unwrap_or_else(Instant::now);
            if observed_at.elapsed() < duration {
                return Ok(false);
            }
        }
        let updated = Lease {
            metadata: lease.metadata.clone(),
            spec: Some(self.record(Some(&spec))),
        };
        match self
            .api
            .replace(&cfg.name, &PostParams::default(), &updated)
            .await
        {
            Ok(l) => {
                self.observe(&l.spec.unwrap_or_default());
                if self.health.is_leader() {
                    self.health.lock().last_renew = Some(Instant::now());
                }
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(source) => Err(Error::UpdateLease {
                namespace: cfg.namespace.clone(),
                name: cfg.name.clone(),
                source,
            }),
        }
    }

    async fn release_if_configured(&self) {
        self.set_leading(false);
        if !self.config.release_on_cancel {
            return;
        }
        match self.release().await {
            Ok(true) => tracing::info!(lease = %self.config.name, "released lease"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(lease = %self.config.name, error = %Chain(&e), "failed to release lease")
            }
        }
    }

    /// Upstream `release`: if this candidate holds the Lease, clear the holder and set the
    /// duration to 1s so a standby takes it at once. `Ok(false)`: not ours to release.
    pub async fn release(&self) -> Result<bool> {
        let cfg = &self.config;
        let Some(lease) = self.get_lease().await? else {
            return Ok(false);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
            return Ok(false);
        }
        let now = MicroTime(Timestamp::now());
        let released = Lease {
            metadata: lease.metadata.clone(),
            spec: Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: spec.lease_transitions,
                ..Default::default()
            }),
        };
        match self
            .api
            .replace(&cfg.name, &PostParams::default(), &released)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(source) => Err(Error::UpdateLease {
                namespace: cfg.namespace.clone(),
                name: cfg.name.clone(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(identity: &str) -> Config {
        Config {
            name: "l".into(),
            namespace: "ns".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }

    #[test]
    fn upstream_defaults_are_valid_and_bad_durations_are_named() {
        cfg("a").validate().expect("defaults");
        let mut c = cfg("a");
        c.renew_deadline = Duration::from_secs(15);
        assert!(c
            .validate()
            .expect_err("deadline")
            .to_string()
            .contains("renewDeadline"));
        let mut c = cfg("a");
        c.retry_period = Duration::from_secs(9);
        assert!(c
            .validate()
            .expect_err("jitter")
            .to_string()
            .contains("JitterFactor"));
        assert!(cfg("").validate().is_err());
    }

    #[test]
    fn identity_is_hostname_underscore_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').expect("underscore");
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_ne!(default_identity(), id);
    }

    #[test]
    fn master_status_metric_is_named_as_upstream() {
        let reg = prometheus::Registry::new();
        let m = Metrics::register(&reg).expect("register");
        m.master_status
            .with_label_values(&["cloud-controller-manager"])
            .set(1);
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&reg.gather())
            .expect("encode");
        assert!(
            text.contains("leader_election_master_status{name=\"cloud-controller-manager\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn health_fails_only_for_a_stale_leader() {
        let h = Health {
            state: Arc::default(),
            lease_duration: Duration::ZERO,
        };
        assert!(h.check().is_ok());
        h.lock().leading = true;
        h.lock().last_renew = Some(Instant::now());
        assert!(h.check().is_ok());
        h.lock().last_renew = Instant::now().checked_sub(Duration::from_secs(21));
        assert!(h.check().is_err());
    }
}
