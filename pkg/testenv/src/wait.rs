//! Waiting in tests for something the system does asynchronously (upstream's
//! `wait.PollUntilContextTimeout` in `k8s.io/apimachinery/pkg/util/wait`, as the e2e framework
//! uses it): poll, and fail with what was awaited once the time is up.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `f` every 200 ms until it returns `Some`, which it returns; fails after `limit`
/// naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
