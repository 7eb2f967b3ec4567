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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_some() {
        let mut calls = 0;
        let v = eventually("the third call", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(v, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 300ms waiting for nothing")]
    async fn fails_after_the_limit() {
        eventually("nothing", Duration::from_millis(300), || async {
            None::<()>
        })
        .await;
    }
}
