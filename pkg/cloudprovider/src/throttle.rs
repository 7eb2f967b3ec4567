//! Warnings that input can repeat, and accept loops under exhaustion (issue #29).
//!
//! A warning an outsider can trigger at will (a failed accept at the open-files limit, a
//! malformed request, a flapping server) must not grow the log without bound: a
//! [`WarnLimiter`] lets one through per interval and counts the ones it held back, which the
//! next warning reports. [`AcceptBackoff`] is the one policy of every accept loop (the admin
//! and webhook servers, the local cloud's API, metadata and data-plane listeners): on an
//! accept error it waits 5 ms, doubling to 1 s, as Go's `net/http` server does, and warns
//! through a limiter instead of spinning and writing a line per attempt.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a repeated warning gets through by default.
pub const WARN_INTERVAL: Duration = Duration::from_secs(5);

/// Lets one warning through per interval; counts the others.
#[derive(Debug)]
pub struct WarnLimiter {
    interval: Duration,
    state: Mutex<LimiterState>,
}

#[derive(Debug)]
struct LimiterState {
    last: Option<Instant>,
    suppressed: u64,
}

impl WarnLimiter {
    /// One warning per `interval` (usable in a `static`).
    pub const fn new(interval: Duration) -> Self {
        Self {
            interval,
            state: Mutex::new(LimiterState {
                last: None,
                suppressed: 0,
            }),
        }
    }

    /// `Some(n)`: log now, and say that `n` like warnings were held back since the last one;
    /// `None`: hold this one back.
    pub fn allow(&self) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match s.last {
            Some(t) if now.duration_since(t) < self.interval => {
                s.suppressed = s.suppressed.saturating_add(1);
                None
            }
            _ => {
                s.last = Some(now);
                Some(std::mem::take(&mut s.suppressed))
            }
        }
    }
}

impl Default for WarnLimiter {
    fn default() -> Self {
        Self::new(WARN_INTERVAL)
    }
}

/// The first wait after a failed accept.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// The longest wait between accept attempts.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The back-off and warning policy of one accept loop.
#[derive(Debug)]
pub struct AcceptBackoff {
    what: &'static str,
    delay: Duration,
    warn: WarnLimiter,
}

impl AcceptBackoff {
    /// A loop accepting `what` (e.g. `"admin server connection"`), named in its warnings.
    pub fn new(what: &'static str) -> Self {
        Self {
            what,
            delay: Duration::ZERO,
            warn: WarnLimiter::default(),
        }
    }

    /// An accept succeeded: the next failure starts from the shortest wait again.
    pub fn succeeded(&mut self) {
        self.delay = Duration::ZERO;
    }

    /// The wait before the next attempt after `error`, advancing the back-off. A connection
    /// that failed on its own (reset or aborted before it was accepted) costs no wait.
    pub fn next_delay(&mut self, error: &std::io::Error) -> Duration {
        use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
        if matches!(
            error.kind(),
            ConnectionAborted | ConnectionRefused | ConnectionReset
        ) {
            return Duration::ZERO;
        }
        self.delay = if self.delay.is_zero() {
            ACCEPT_BACKOFF_MIN
        } else {
            (self.delay * 2).min(ACCEPT_BACKOFF_MAX)
        };
        self.delay
    }

    /// An accept failed: warn (rate-limited) and wait before the caller tries again.
    pub async fn failed(&mut self, error: &std::io::Error) {
        let delay = self.next_delay(error);
        if delay.is_zero() {
            tracing::debug!(what = self.what, %error, "a connection failed before it was accepted");
            return;
        }
        if let Some(suppressed) = self.warn.allow() {
            tracing::warn!(
                what = self.what,
                %error,
                retry_in = ?delay,
                suppressed,
                "accepting a connection failed; backing off (suppressed: like warnings held back since the last)"
            );
        }
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn limiter_lets_one_through_per_interval_and_counts_the_rest() {
        let l = WarnLimiter::new(Duration::from_millis(200));
        assert_eq!(l.allow(), Some(0));
        for _ in 0..1000 {
            assert_eq!(l.allow(), None);
        }
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(
            l.allow(),
            Some(1000),
            "the held-back count is reported once"
        );
        assert_eq!(l.allow(), None);
    }

    #[test]
    fn accept_backoff_doubles_to_the_cap_and_resets() {
        let mut b = AcceptBackoff::new("test");
        let emfile = Error::from_raw_os_error(24);
        let delays: Vec<_> = (0..12).map(|_| b.next_delay(&emfile)).collect();
        assert_eq!(delays[0], ACCEPT_BACKOFF_MIN);
        assert_eq!(delays[1], ACCEPT_BACKOFF_MIN * 2);
        assert!(delays.windows(2).all(|w| w[1] >= w[0]), "{delays:?}");
        assert_eq!(delays[11], ACCEPT_BACKOFF_MAX);
        assert_eq!(
            b.next_delay(&Error::from(ErrorKind::ConnectionAborted)),
            Duration::ZERO,
            "a connection's own failure is no reason to wait"
        );
        b.succeeded();
        assert_eq!(b.next_delay(&emfile), ACCEPT_BACKOFF_MIN);
    }
}
