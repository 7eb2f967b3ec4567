//! Leader-election Leases as the tests of the controller managers look at them: who holds
//! one, waiting for the holder to change, and taking one over as another candidate would
//! after a partition (upstream's leader-election tests read and write the Lease the same way,
//! `k8s.io/client-go/tools/leaderelection/resourcelock`).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};

/// The Lease `namespace/name`, which may not exist yet.
#[derive(Clone)]
pub struct LeaseRef {
    api: Api<Lease>,
    namespace: String,
    name: String,
}

impl LeaseRef {
    pub fn new(client: Client, namespace: &str, name: &str) -> LeaseRef {
        LeaseRef {
            api: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Its holder; `None` when there is no Lease or it is released (empty holder).
    pub async fn holder(&self) -> Option<String> {
        self.api
            .get_opt(&self.name)
            .await
            .unwrap_or_else(|e| panic!("get lease {}/{}: {e}", self.namespace, self.name))
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty())
    }

    /// Polls the holder every `every` until it satisfies `pred`; the holder then and how
    /// long it took. Fails after `limit`, naming `what` and the last holder.
    pub async fn wait_holder(
        &self,
        what: &str,
        limit: Duration,
        every: Duration,
        pred: impl Fn(&Option<String>) -> bool,
    ) -> (Option<String>, Duration) {
        let start = Instant::now();
        loop {
            let h = self.holder().await;
            if pred(&h) {
                return (h, start.elapsed());
            }
            assert!(
                start.elapsed() < limit,
                "{what}: lease {}/{} still held by {h:?} after {limit:?}",
                self.namespace,
                self.name
            );
            tokio::time::sleep(every).await;
        }
    }

    /// Makes `identity` the holder for `duration_seconds`, as another candidate that took the
    /// Lease over; retried on conflicts with the current holder's renewals.
    pub async fn take_over(&self, identity: &str, duration_seconds: i32) {
        loop {
            let mut l = self.api.get(&self.name).await.expect("lease");
            let spec = l.spec.get_or_insert_with(Default::default);
            spec.holder_identity = Some(identity.into());
            spec.lease_duration_seconds = Some(duration_seconds);
            match self
                .api
                .replace(&self.name, &PostParams::default(), &l)
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => panic!("replace lease: {e}"),
            }
        }
    }
}
