//! Named health checks behind `/healthz`, `/livez` and `/readyz` (upstream
//! `k8s.io/apiserver/pkg/server/healthz`): each endpoint answers `ok` (200) when all its checks
//! pass, otherwise 500 with one `[+]name ok` / `[-]name failed: reason` line per check, which is
//! also the answer to `?verbose`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// One check: `Ok(())` healthy, `Err(reason)` not.
pub type HealthCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Set once a task of this process panicked; from then on every check set fails (the
/// process is about to exit, and must not look healthy meanwhile).
static PANICKED: AtomicBool = AtomicBool::new(false);

/// Marks the process as broken: `ping`, hence `/healthz`, `/livez` and `/readyz`, fail from
/// now on. Called by the binary's panic hook before it exits.
pub fn mark_panicked() {
    PANICKED.store(true, Ordering::SeqCst);
}

/// The liveness and readiness checks of a component.
#[derive(Clone, Default)]
pub struct Checks {
    live: Arc<RwLock<Vec<(String, HealthCheck)>>>,
    ready: Arc<RwLock<Vec<(String, HealthCheck)>>>,
}

impl Checks {
    /// Checks with upstream's `ping` in both sets; `ping` fails once a task panicked
    /// ([`mark_panicked`]).
    pub fn new() -> Self {
        let c = Self::default();
        c.add_live(
            "ping",
            Arc::new(|| {
                if PANICKED.load(Ordering::SeqCst) {
                    Err("a task of this process panicked".into())
                } else {
                    Ok(())
                }
            }),
        );
        c
    }

    /// Adds a check to `/healthz`, `/livez` and `/readyz`.
    pub fn add_live(&self, name: &str, check: HealthCheck) {
        self.live
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((name.into(), check));
    }

    /// Adds a check to `/readyz` only.
    pub fn add_ready(&self, name: &str, check: HealthCheck) {
        self.ready
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((name.into(), check));
    }

    /// A flag-backed readiness check, false until [`ReadyFlag::set`] (e.g. "started": the
    /// component has reached the apiserver and joined the election).
    pub fn add_ready_flag(&self, name: &str) -> ReadyFlag {
        let flag = ReadyFlag(Arc::new(AtomicBool::new(false)));
        let f = flag.clone();
        let reason = format!("{name} not yet complete");
        self.add_ready(
            name,
            Arc::new(move || {
                if f.0.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err(reason.clone())
                }
            }),
        );
        flag
    }

    /// Runs the checks of `/livez`/`/healthz` (`ready == false`) or `/readyz`: whether all
    /// pass, and the verbose report.
    pub fn run(&self, ready: bool) -> (bool, String) {
        let mut all = self.live.read().unwrap_or_else(|p| p.into_inner()).clone();
        if ready {
            all.extend(
                self.ready
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .cloned(),
            );
        }
        let mut ok = true;
        let mut report = String::new();
        for (name, check) in &all {
            match check() {
                Ok(()) => {
                    let _ = writeln!(report, "[+]{name} ok");
                }
                Err(why) => {
                    ok = false;
                    let _ = writeln!(report, "[-]{name} failed: {why}");
                }
            }
        }
        (ok, report)
    }
}

/// A readiness condition the component sets once.
#[derive(Clone, Debug)]
pub struct ReadyFlag(Arc<AtomicBool>);

impl ReadyFlag {
    /// Marks the condition as met (`true`) or not.
    pub fn set(&self, value: bool) {
        self.0.store(value, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_includes_liveness_checks_and_flags() {
        let c = Checks::new();
        let started = c.add_ready_flag("started");
        assert!(c.run(false).0);
        let (ok, report) = c.run(true);
        assert!(!ok);
        assert_eq!(
            report,
            "[+]ping ok\n[-]started failed: started not yet complete\n"
        );
        started.set(true);
        assert!(c.run(true).0);
        c.add_live("leaderElection", Arc::new(|| Err("stale".into())));
        let (ok, report) = c.run(false);
        assert!(!ok);
        assert!(
            report.contains("[-]leaderElection failed: stale"),
            "{report}"
        );
    }
}
