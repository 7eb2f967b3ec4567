//! Waiting for the cloud to finish something (a Compute Engine operation, an Octavia load
//! balancer or a Cinder volume settling, an EC2 attachment, a vSphere task): every wait polls
//! with an exponential back-off with jitter (backon's, as kube-runtime's watcher) and gives up
//! after a bounded total time, so a state that never changes costs a few dozen requests and
//! ends in an error naming what was waited for, not a hot loop. Upstream equivalent:
//! `wait.PollUntilContextTimeout` / `wait.ExponentialBackoff` of k8s.io/apimachinery as the
//! providers use them.

use std::future::Future;
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable as _};

/// How a wait polls: the first pause, the longest pause (each doubles, plus up to as much
/// again of jitter) and the total time after which it gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The pause after the first poll.
    pub first: Duration,
    /// The longest pause before jitter.
    pub max_delay: Duration,
    /// The whole wait, polls included.
    pub total: Duration,
}

impl Backoff {
    /// A back-off from `first` up to `max_delay`, giving up after `total`.
    pub const fn new(first: Duration, max_delay: Duration, total: Duration) -> Self {
        Backoff {
            first,
            max_delay,
            total,
        }
    }

    fn builder(&self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_min_delay(self.first)
            .with_max_delay(self.max_delay.max(self.first))
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .with_total_delay(Some(self.total))
    }
}

/// One poll's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll<T> {
    /// Done, with the result.
    Ready(T),
    /// Not yet; the state seen (`RUNNING`, `PENDING_UPDATE`), quoted if the wait times out.
    Pending(String),
}

/// A wait that ran out of time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("still {state} after {}s and {polls} polls", waited.as_secs())]
pub struct TimedOut {
    /// The last state seen (empty when no poll finished).
    pub state: String,
    /// How long it waited.
    pub waited: Duration,
    /// Polls made.
    pub polls: u32,
}

/// Why a wait ended without a result.
#[derive(Debug)]
pub enum WaitError<E> {
    /// A poll failed; waiting stopped there.
    Failed(E),
    /// The state did not change within the total time.
    TimedOut(TimedOut),
}

enum Step<E> {
    Pending(String),
    Failed(E),
}

/// Polls `check` until it is [`Poll::Ready`] or fails, pausing between polls as `backoff`
/// says; after `backoff.total` (a poll in flight is abandoned then) the wait is
/// [`WaitError::TimedOut`], which the caller turns into its own error naming what it waited
/// for.
pub async fn poll_until<T, E, F, Fut>(backoff: Backoff, mut check: F) -> Result<T, WaitError<E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Poll<T>, E>>,
{
    let started = Instant::now();
    let mut state = String::new();
    let mut polls = 0u32;
    let outcome = {
        let attempt = || {
            polls = polls.saturating_add(1);
            let poll = check();
            async move {
                match poll.await {
                    Ok(Poll::Ready(t)) => Ok(t),
                    Ok(Poll::Pending(s)) => Err(Step::Pending(s)),
                    Err(e) => Err(Step::Failed(e)),
                }
            }
        };
        let retried = attempt
            .retry(backoff.builder())
            .sleep(tokio::time::sleep)
            .when(|s| matches!(s, Step::Pending(_)))
            .notify(|s, _| {
                if let Step::Pending(s) = s {
                    state.clone_from(s);
                }
            });
        tokio::time::timeout(backoff.total, retried).await
    };
    let timed_out = |state: String| {
        WaitError::TimedOut(TimedOut {
            state,
            waited: started.elapsed(),
            polls,
        })
    };
    match outcome {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(Step::Failed(e))) => Err(WaitError::Failed(e)),
        // The back-off's total ran out before the clock did.
        Ok(Err(Step::Pending(s))) => Err(timed_out(s)),
        Err(_elapsed) => Err(timed_out(state)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    const MS: Duration = Duration::from_millis(1);

    #[tokio::test(start_paused = true)]
    async fn a_state_that_never_changes_is_polled_with_back_off_then_times_out() {
        let polls = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let r: Result<(), WaitError<()>> = poll_until(
            Backoff::new(MS * 100, Duration::from_secs(2), Duration::from_secs(30)),
            || async {
                polls.fetch_add(1, Ordering::Relaxed);
                Ok(Poll::Pending("RUNNING".into()))
            },
        )
        .await;
        let Err(WaitError::TimedOut(t)) = r else {
            panic!("not a timeout")
        };
        assert_eq!(t.state, "RUNNING");
        let n = polls.load(Ordering::Relaxed);
        assert_eq!(t.polls, n);
        // A hot loop would poll without end; with the back-off, 30s of pauses of 0.1s
        // doubling to 2s (plus jitter) are a couple of dozen polls at most.
        assert!((3..=40).contains(&n), "{n} polls");
        assert!(
            started.elapsed() <= Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
        assert!(t.to_string().starts_with("still RUNNING after"), "{t}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_result_comes_back_once_ready_and_a_failure_stops_the_wait() {
        let polls = AtomicU32::new(0);
        let r: Result<u32, WaitError<String>> = poll_until(
            Backoff::new(MS, MS * 10, Duration::from_secs(5)),
            || async {
                let n = polls.fetch_add(1, Ordering::Relaxed);
                Ok(if n == 3 {
                    Poll::Ready(n)
                } else {
                    Poll::Pending(format!("n={n}"))
                })
            },
        )
        .await;
        assert_eq!(r.unwrap(), 3);
        let r: Result<(), WaitError<String>> = poll_until(
            Backoff::new(MS, MS * 10, Duration::from_secs(5)),
            || async { Err("gone".to_owned()) },
        )
        .await;
        assert!(matches!(r, Err(WaitError::Failed(e)) if e == "gone"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_poll_that_hangs_is_cut_off_at_the_total() {
        let started = tokio::time::Instant::now();
        let r: Result<(), WaitError<()>> =
            poll_until(Backoff::new(MS, MS * 10, Duration::from_secs(3)), || {
                std::future::pending()
            })
            .await;
        let Err(WaitError::TimedOut(t)) = r else {
            panic!("not a timeout")
        };
        assert_eq!((t.state.as_str(), t.polls), ("", 1));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}
