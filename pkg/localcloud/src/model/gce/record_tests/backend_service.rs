//! Backend services and health checks, stored and shown, against the store without HTTP.

use super::{spec, stored};
use crate::model::gce::backend_service::*;
use crate::model::gce::health_check::HealthCheckSpec;

#[test]
fn references_name_a_regional_service() {
    assert_eq!(
        backend_service_key("https://h/compute/v1/projects/p/regions/r/backendServices/b"),
        Some(("regions/r".into(), "b".into()))
    );
    assert_eq!(backend_service_key("global/backendServices/b"), None);
}

#[test]
fn stored_with_backends_and_shown_with_a_fingerprint() {
    let fields = serde_json::json!({
        "backends": [{"group": "https://h/zones/z/instanceGroups/g", "balancingMode": "CONNECTION"}],
        "healthChecks": ["https://h/global/healthChecks/hc"], "loadBalancingScheme": "INTERNAL",
        "protocol": "TCP", "sessionAffinity": "NONE", "timeoutSec": 30,
    });
    let (_dir, store, _) = stored::<BackendServiceSpec>("p", "b", "regions/r", fields);
    let got = store
        .read(|v| BackendService::get_at(v, "regions/r", "b"))
        .unwrap();
    assert_eq!(
        got.spec.backends[0].group,
        "https://h/zones/z/instanceGroups/g"
    );
    let mut shown = got.fields();
    BackendServiceSpec::shown(&mut shown);
    let print = shown["fingerprint"].clone();
    let mut changed = got.clone();
    changed.spec.session_affinity = "CLIENT_IP".into();
    let mut shown = changed.fields();
    BackendServiceSpec::shown(&mut shown);
    assert_ne!(shown["fingerprint"], print);
}

#[test]
fn a_health_check_probes_as_its_type() {
    let hc: HealthCheckSpec = spec(serde_json::json!({
        "type": "TCP", "checkIntervalSec": 5, "timeoutSec": 5, "healthyThreshold": 2,
        "unhealthyThreshold": 2, "tcpHealthCheck": {"port": 10256},
    }));
    assert_eq!(hc.probe().and_then(|p| p.port), Some(10256));
    let hc = HealthCheckSpec {
        kind: "HTTP".into(),
        ..hc
    };
    assert!(hc.probe().is_none());
}
