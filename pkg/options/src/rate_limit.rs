//! `--kube-api-qps` / `--kube-api-burst`: a client-side rate limit in front of every request
//! to the apiserver (upstream: client-go's `flowcontrol.NewTokenBucketRateLimiter` in
//! `rest.Config`). `governor`'s GCRA limiter is the bucket: it starts full with `burst`
//! requests and refills at `qps` per second; a request that finds it empty waits until its
//! turn. The wait happens in `poll_ready`, so kube's request buffer releases requests in order
//! at the configured rate; watches count once, when they are opened, as upstream.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use governor::clock::Clock as _;
use governor::{DefaultDirectRateLimiter, Quota};
use tower::{Layer, Service};

/// The accepted `--kube-api-qps` values besides 0 (client-go's default): a request per 100 s
/// at the slowest (slower would wait longer than any caller does), a million per second at
/// the fastest.
pub const QPS_RANGE: std::ops::RangeInclusive<f32> = 0.01..=1_000_000.0;
/// The largest `--kube-api-burst`.
pub const MAX_BURST: u32 = 1_000_000;

/// client-go's defaults when a flag is 0.
const DEFAULT_QPS: f32 = 5.0;
const DEFAULT_BURST: u32 = 10;

/// The shared bucket.
#[derive(Debug)]
pub struct TokenBucket {
    limiter: DefaultDirectRateLimiter,
}

impl TokenBucket {
    /// A full bucket; 0 means client-go's default (5 QPS, burst 10). The flags are
    /// range-checked ([`crate::KubeClientOptions::validate`]); here a value that is not a
    /// positive finite number also falls back to the default, and one outside the accepted
    /// ranges is clamped to them, so no rate can overflow the limiter's arithmetic.
    pub fn new(qps: f32, burst: u32) -> Self {
        Self {
            limiter: DefaultDirectRateLimiter::direct(quota(qps, burst)),
        }
    }

    /// Takes a token if one is there; otherwise says how long until one will be.
    pub fn try_take(&self) -> Result<(), Duration> {
        self.limiter
            .check()
            .map_err(|not_yet| not_yet.wait_time_from(self.limiter.clock().now()))
    }
}

/// The limiter's quota for the flags' values (see [`TokenBucket::new`]).
fn quota(qps: f32, burst: u32) -> Quota {
    let qps = if qps.is_finite() && qps > 0.0 {
        qps.clamp(*QPS_RANGE.start(), *QPS_RANGE.end())
    } else {
        DEFAULT_QPS
    };
    let burst = NonZeroU32::new(burst.min(MAX_BURST))
        .or(NonZeroU32::new(DEFAULT_BURST))
        .unwrap_or(NonZeroU32::MIN);
    // One token every 1/qps seconds: at least 1µs (a million per second), at most 100 s.
    let period = Duration::from_secs_f64(1.0 / f64::from(qps));
    Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(burst)
}

/// Tower layer adding the limit to a client's service stack.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl RateLimitLayer {
    /// A layer with its own bucket.
    pub fn new(qps: f32, burst: u32) -> Self {
        Self {
            bucket: Arc::new(TokenBucket::new(qps, burst)),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The limited service.
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    permitted: bool,
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            loop {
                if let Some(w) = self.wait.as_mut() {
                    std::task::ready!(w.as_mut().poll(cx));
                    self.wait = None;
                }
                match self.bucket.try_take() {
                    Ok(()) => {
                        self.permitted = true;
                        break;
                    }
                    Err(d) => self.wait = Some(Box::pin(tokio::time::sleep(d))),
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tower::ServiceExt;

    #[test]
    fn burst_is_free_then_qps_paces() {
        let b = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(b.try_take(), Ok(()));
        }
        let fourth = b.try_take().expect_err("the bucket is empty");
        assert!(fourth > Duration::from_millis(80) && fourth <= Duration::from_millis(100));
    }

    #[test]
    fn zero_means_client_go_defaults() {
        let q = quota(0.0, 0);
        assert_eq!(q.replenish_interval(), Duration::from_millis(200));
        assert_eq!(q.burst_size().get(), 10);
        for bad in [-1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            assert_eq!(quota(bad, 0), q, "{bad}");
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            /// Any rate and burst (tiny, huge, NaN, infinite, negative): reserving never
            /// panics, and the first `burst` tokens are free.
            #[test]
            fn any_rate_reserves_without_panic(qps in any::<f32>(), burst in 0u32..64, n in 0usize..80) {
                let b = TokenBucket::new(qps, burst);
                let free = if burst == 0 { DEFAULT_BURST } else { burst } as usize;
                for i in 0..n {
                    let taken = b.try_take();
                    if i < free {
                        prop_assert_eq!(taken, Ok(()));
                    }
                }
            }
        }
    }

    #[tokio::test]
    async fn requests_beyond_the_burst_wait() {
        let svc = tower::service_fn(|x: u32| async move { Ok::<_, std::convert::Infallible>(x) });
        let mut svc = RateLimitLayer::new(20.0, 2).layer(svc);
        let start = Instant::now();
        for i in 0..6 {
            let r = svc
                .ready()
                .await
                .expect("ready")
                .call(i)
                .await
                .expect("call");
            assert_eq!(r, i);
        }
        // 2 free, then 4 at 20/s: about 200ms.
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(180), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }
}
