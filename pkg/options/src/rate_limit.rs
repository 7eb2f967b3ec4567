//! `--kube-api-qps` / `--kube-api-burst`: a client-side token bucket in front of every request
//! to the apiserver (upstream: client-go's `flowcontrol.NewTokenBucketRateLimiter` in
//! `rest.Config`). The bucket starts full with `burst` tokens and refills at `qps` per second;
//! a request that finds it empty waits for its token. The wait happens in `poll_ready`, so
//! kube's request buffer releases requests in order at the configured rate; watches count
//! once, when they are opened, as upstream.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tower::{Layer, Service};

/// client-go's defaults when a flag is 0.
const DEFAULT_QPS: f32 = 5.0;
const DEFAULT_BURST: u32 = 10;

/// The shared bucket.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket; 0 means client-go's default (5 QPS, burst 10). The flags are
    /// range-checked ([`crate::KubeClientOptions::validate`]); here a value that is not a
    /// positive finite number also falls back to the default, so no rate can panic below.
    pub fn new(qps: f32, burst: u32) -> Self {
        let qps = if qps.is_finite() && qps > 0.0 {
            qps
        } else {
            DEFAULT_QPS
        };
        let burst = if burst > 0 { burst } else { DEFAULT_BURST };
        Self {
            qps: f64::from(qps),
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Takes a token now and says how long to wait before using it (0 if one was there).
    /// Tokens may go negative: later callers queue behind earlier ones, as `rate.Limiter`.
    pub fn reserve(&self) -> Duration {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(s.1).as_secs_f64() * self.qps;
        s.0 = (s.0 + refill).min(self.burst);
        s.1 = now;
        s.0 -= 1.0;
        if s.0 >= 0.0 {
            Duration::ZERO
        } else {
            // Saturates instead of panicking on a wait no Duration holds (a tiny rate).
            Duration::try_from_secs_f64(-s.0 / self.qps).unwrap_or(Duration::MAX)
        }
    }
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
            if self.wait.is_none() {
                let d = self.bucket.reserve();
                if d.is_zero() {
                    self.permitted = true;
                } else {
                    self.wait = Some(Box::pin(tokio::time::sleep(d)));
                }
            }
            if let Some(w) = self.wait.as_mut() {
                std::task::ready!(w.as_mut().poll(cx));
                self.wait = None;
                self.permitted = true;
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
    use tower::ServiceExt;

    #[test]
    fn burst_is_free_then_qps_paces() {
        let b = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        let fourth = b.reserve();
        assert!(fourth > Duration::from_millis(80) && fourth <= Duration::from_millis(100));
        let fifth = b.reserve();
        assert!(fifth > Duration::from_millis(180) && fifth <= Duration::from_millis(200));
    }

    #[test]
    fn zero_means_client_go_defaults() {
        let b = TokenBucket::new(0.0, 0);
        assert_eq!(b.qps, 5.0);
        assert_eq!(b.burst, 10.0);
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
                    let d = b.reserve();
                    if i < free {
                        prop_assert_eq!(d, Duration::ZERO);
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
