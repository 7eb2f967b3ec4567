//! A process-wide lock by group, for test binaries that hold the tests of several former test
//! files (one `tests/it/` binary per crate). Tests of one group may run together; tests of
//! different groups exclude each other. Before the files were merged, each ran as its own
//! process, so only tests of the same file ran at once against the shared kube-apiserver; many
//! start cluster-wide controllers (cloud-node-lifecycle deletes other tests' NotReady Nodes,
//! service controllers pick up other tests' Services, leader election on fixed Lease names) or
//! change the process (environment variables, resource limits). Taking the guard of the former
//! file first keeps exactly that: `let _g = hypercloud_testenv::group("ccm_local_cloud").await;`.
//! Tests that touch neither the cluster nor the process may go without.

use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio::sync::Notify;

/// Which group holds the lock, and how many of its tests.
struct State {
    group: Option<&'static str>,
    holders: usize,
}

static STATE: Mutex<State> = Mutex::new(State {
    group: None,
    holders: 0,
});
/// Wakes blocking waiters ([`group_blocking`]) when the lock is free.
static FREED: Condvar = Condvar::new();

/// Wakes async waiters ([`group`]) when the lock is free.
fn freed() -> &'static Notify {
    static FREED_ASYNC: OnceLock<Notify> = OnceLock::new();
    FREED_ASYNC.get_or_init(Notify::new)
}

/// A test that panicked holding the state only poisons it; the state itself stays consistent.
fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Joins `group` if it holds the lock or nobody does.
fn try_enter(state: &mut State, group: &'static str) -> bool {
    match state.group {
        Some(g) if g != group => false,
        _ => {
            state.group = Some(group);
            state.holders += 1;
            true
        }
    }
}

/// Held while a test of `group` runs; other groups wait until the last one of this group drops.
#[must_use = "the group is left when the guard drops"]
#[derive(Debug)]
pub struct GroupGuard {
    group: &'static str,
}

impl GroupGuard {
    /// The group this guard holds.
    pub fn group(&self) -> &'static str {
        self.group
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let mut s = state();
        s.holders = s.holders.saturating_sub(1);
        if s.holders == 0 {
            s.group = None;
            drop(s);
            FREED.notify_all();
            freed().notify_waiters();
        }
    }
}

/// Waits until no test of another group runs, then joins `group` (in async tests).
pub async fn group(group: &'static str) -> GroupGuard {
    loop {
        // Registered before looking, so a release between the look and the wait wakes us.
        let notified = freed().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if try_enter(&mut state(), group) {
            return GroupGuard { group };
        }
        notified.await;
    }
}

/// [`group`] for tests without a runtime: blocks the thread.
pub fn group_blocking(group: &'static str) -> GroupGuard {
    let mut s = state();
    while !try_enter(&mut s, group) {
        s = FREED.wait(s).unwrap_or_else(PoisonError::into_inner);
    }
    GroupGuard { group }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn groups_exclude_each_other_and_members_share() {
        // Members of "a" overlap; "b" only runs once no "a" runs.
        let a1 = group("groups-test-a").await;
        let a2 = group("groups-test-a").await;
        let in_b = Arc::new(AtomicUsize::new(0));
        let b = {
            let in_b = Arc::clone(&in_b);
            tokio::spawn(async move {
                let g = group("groups-test-b").await;
                in_b.store(1, Ordering::SeqCst);
                g
            })
        };
        // Leaves at once: whichever of b and c gets in first, the other one follows.
        let blocking = tokio::task::spawn_blocking(|| group_blocking("groups-test-c").group());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(in_b.load(Ordering::SeqCst), 0, "b ran beside a");
        drop(a1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(in_b.load(Ordering::SeqCst), 0, "b ran beside a");
        drop(a2);
        let gb = b.await.expect("join");
        assert_eq!(gb.group(), "groups-test-b");
        drop(gb);
        assert_eq!(blocking.await.expect("join"), "groups-test-c");
    }
}
