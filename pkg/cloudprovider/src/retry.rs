//! The one retry policy of the providers' HTTP calls: an attempt that failed in a way worth
//! repeating (a connection error, 429, 5xx; what counts is the caller's to say, see
//! [`retryable_status`]) is tried again after a jittered exponential back-off (backon's, as
//! [`crate::wait`]), or after the server's `Retry-After`, clamped; after the last attempt
//! the caller gets the last outcome and how many attempts it took. Upstream equivalent:
//! gophercloud's `RetryFunc`/`RetryBackoffFunc`, govmomi's `vim25.Retry` round tripper; the
//! AWS provider keeps the AWS SDK's own retry strategy.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable as _};

/// How often and how long to wait between attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (0 counts as 1).
    pub attempts: u32,
    /// The pause after the first attempt; it doubles per attempt, plus up to as much again
    /// of jitter.
    pub first_delay: Duration,
    /// No pause is longer (jitter included), unless the server asked for one.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured; a longer one is clamped to it.
    pub max_retry_after: Duration,
}

/// What one attempt came to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// Final: success, or a failure not worth repeating.
    Done(T),
    /// Worth another attempt, after `retry_after` if the server said so.
    Again {
        /// The outcome, given back if no attempt is left.
        outcome: T,
        /// The server's `Retry-After`, unclamped.
        retry_after: Option<Duration>,
    },
}

/// The last outcome and the attempts it took.
#[derive(Debug)]
pub struct Retried<T> {
    /// The last attempt's outcome.
    pub outcome: T,
    /// Attempts made.
    pub attempts: u32,
    /// Whether the last outcome was still worth repeating (the attempts ran out).
    pub exhausted: bool,
}

impl RetryPolicy {
    /// A policy of `attempts` with pauses from `first_delay` up to `max_delay`, no server
    /// `Retry-After` honoured beyond `max_delay`.
    pub const fn new(attempts: u32, first_delay: Duration, max_delay: Duration) -> Self {
        RetryPolicy {
            attempts,
            first_delay,
            max_delay,
            max_retry_after: max_delay,
        }
    }

    /// The pause before the next attempt: the server's wish (clamped to
    /// [`Self::max_retry_after`]) or the back-off's (clamped to [`Self::max_delay`]).
    fn pause(&self, retry_after: Option<Duration>, backoff: Duration) -> Duration {
        match retry_after {
            Some(d) => d.min(self.max_retry_after),
            None => backoff.min(self.max_delay),
        }
    }

    /// Runs `attempt` (given the attempt's number, from 1) until it is [`Attempt::Done`] or
    /// the attempts run out; `on_retry` hears of each outcome repeated and the pause before
    /// the next attempt.
    pub async fn run<T, F, Fut>(
        &self,
        mut attempt: F,
        mut on_retry: impl FnMut(&T, u32, Duration),
    ) -> Retried<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        let builder = ExponentialBuilder::new()
            .with_min_delay(self.first_delay)
            .with_max_delay(self.max_delay.max(self.first_delay))
            .with_factor(2.0)
            .with_jitter()
            .with_max_times(self.attempts.saturating_sub(1) as usize);
        // Atomic only so that the future stays `Send`; one task counts.
        let made = AtomicU32::new(0);
        let outcome = {
            let once = || {
                let n = made.fetch_add(1, Ordering::Relaxed).saturating_add(1);
                let fut = attempt(n);
                async move {
                    match fut.await {
                        Attempt::Done(t) => Ok(t),
                        Attempt::Again {
                            outcome,
                            retry_after,
                        } => Err((outcome, retry_after)),
                    }
                }
            };
            once.retry(builder)
                .sleep(tokio::time::sleep)
                .adjust(|(_, retry_after), next| {
                    next.map(|backoff| self.pause(*retry_after, backoff))
                })
                .notify(|(outcome, _), pause| {
                    on_retry(outcome, made.load(Ordering::Relaxed), pause)
                })
                .await
        };
        match outcome {
            Ok(outcome) => Retried {
                outcome,
                attempts: made.load(Ordering::Relaxed),
                exhausted: false,
            },
            Err((outcome, _)) => Retried {
                outcome,
                attempts: made.load(Ordering::Relaxed),
                exhausted: true,
            },
        }
    }
}

/// Whether an HTTP status is worth another attempt: 429 and every 5xx.
pub fn retryable_status(status: u16) -> bool {
    status == 429 || status >= 500
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick(attempts: u32) -> RetryPolicy {
        RetryPolicy::new(attempts, Duration::from_millis(1), Duration::from_millis(4))
    }

    #[tokio::test]
    async fn repeats_until_done_or_out_of_attempts() {
        let calls = AtomicU32::new(0);
        let r = quick(5)
            .run(
                |n| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    async move {
                        if n < 3 {
                            Attempt::Again {
                                outcome: n,
                                retry_after: None,
                            }
                        } else {
                            Attempt::Done(n)
                        }
                    }
                },
                |_, _, _| {},
            )
            .await;
        assert_eq!((r.outcome, r.attempts, r.exhausted), (3, 3, false));
        let mut retried = Vec::new();
        let r = quick(4)
            .run(
                |n| async move {
                    Attempt::Again {
                        outcome: n,
                        retry_after: None,
                    }
                },
                |o, n, pause| retried.push((*o, n, pause)),
            )
            .await;
        assert_eq!((r.outcome, r.attempts, r.exhausted), (4, 4, true));
        assert_eq!(retried.len(), 3);
        assert!(retried
            .iter()
            .all(|(_, _, p)| *p <= Duration::from_millis(4)));
        let r = quick(0)
            .run(
                |n| async move {
                    Attempt::Again {
                        outcome: n,
                        retry_after: None,
                    }
                },
                |_, _, _| {},
            )
            .await;
        assert_eq!((r.attempts, r.exhausted), (1, true));
    }

    #[test]
    fn retry_after_is_honoured_and_clamped() {
        let p = RetryPolicy {
            max_retry_after: Duration::from_secs(60),
            ..RetryPolicy::new(3, Duration::from_millis(200), Duration::from_secs(5))
        };
        assert_eq!(
            p.pause(Some(Duration::from_secs(30)), Duration::from_millis(200)),
            Duration::from_secs(30)
        );
        assert_eq!(
            p.pause(Some(Duration::from_secs(3600)), Duration::ZERO),
            Duration::from_secs(60)
        );
        assert_eq!(
            p.pause(None, Duration::from_secs(9)),
            Duration::from_secs(5),
            "jitter never passes the maximum"
        );
    }

    #[test]
    fn statuses_worth_repeating() {
        assert!(retryable_status(429) && retryable_status(500) && retryable_status(503));
        assert!(!retryable_status(404) && !retryable_status(412) && !retryable_status(200));
    }
}
