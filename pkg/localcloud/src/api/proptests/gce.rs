//! The writes of the Compute Engine dialect the body properties run against, with their
//! fixtures.

use super::*;

/// The project, zone and region of the GCE dialect, and its API prefix for the project.
pub(super) fn gce_scope(h: &Harness) -> (String, String, String) {
    let zone = h.cloud.store.read(|r| crate::api::gce::zones(r)[0].clone());
    (
        "/compute/v1/projects/demo".to_owned(),
        zone,
        h.cloud.config.region.clone(),
    )
}

/// Every write of the Compute Engine dialect, with fixtures made through it: an instance
/// `fx` (metadata `role=node`, tag `web`), an HTTP health check `fxhc` and a target pool
/// `fxpool`, project metadata `k=v`.
pub(super) fn gce_targets(h: &Harness) -> Vec<Target> {
    let (p, zone, region) = gce_scope(h);
    let flavor = crate::defaults::FLAVORS[1].name;
    let ok = |path: String, body: Value| {
        let (status, reply, _) = h.send(Method::POST, &path, &body);
        assert!(status.is_success(), "{path}: {status} {reply}");
    };
    let instances = format!("{p}/zones/{zone}/instances");
    ok(
        instances.clone(),
        json!({"name": "fx", "machineType": format!("zones/{zone}/machineTypes/{flavor}"),
            "metadata": {"items": [{"key": "role", "value": "node"}]}, "tags": {"items": ["web"]}}),
    );
    ok(
        format!("{p}/global/httpHealthChecks"),
        json!({"name": "fxhc", "port": 8080}),
    );
    ok(
        format!("{p}/regions/{region}/targetPools"),
        json!({"name": "fxpool", "healthChecks": ["global/httpHealthChecks/fxhc"]}),
    );
    let fp = h.fingerprint(&p, "/commonInstanceMetadata/fingerprint");
    ok(
        format!("{p}/setCommonInstanceMetadata"),
        json!({"fingerprint": fp, "items": [{"key": "k", "value": "v"}]}),
    );
    let fx = format!("{instances}/fx");
    let t = |name, path: String, body| Target {
        name,
        method: Method::POST,
        path,
        body,
        wrapped: false,
    };
    let pool = format!("{p}/regions/{region}/targetPools/fxpool");
    let fx_ref = json!({"instances": [{"instance": format!("zones/{zone}/instances/fx")}]});
    vec![
        t(
            "gce insert instance",
            instances.clone(),
            json!({"name": "gi", "machineType": format!("zones/{zone}/machineTypes/{flavor}"),
                "description": "d", "networkInterfaces": [{"network": "global/networks/default"}],
                "metadata": {"items": [{"key": "a", "value": "b"}]}, "tags": {"items": ["web"]}}),
        ),
        t(
            "gce set instance metadata",
            format!("{fx}/setMetadata"),
            json!({"fingerprint": h.fingerprint(&fx, "/metadata/fingerprint"),
                "items": [{"key": "role", "value": "node"}]}),
        ),
        t(
            "gce set instance tags",
            format!("{fx}/setTags"),
            json!({"fingerprint": h.fingerprint(&fx, "/tags/fingerprint"), "items": ["web"]}),
        ),
        t(
            "gce set common instance metadata",
            format!("{p}/setCommonInstanceMetadata"),
            json!({"fingerprint": h.fingerprint(&p, "/commonInstanceMetadata/fingerprint"),
                "items": [{"key": "k", "value": "v"}]}),
        ),
        t(
            "gce insert disk",
            format!("{p}/zones/{zone}/disks"),
            json!({"name": "gd", "sizeGb": "10", "description": "d"}),
        ),
        t(
            "gce insert route",
            format!("{p}/global/routes"),
            json!({"name": "gr", "network": "global/networks/default", "destRange": "10.250.0.0/24",
                "nextHopInstance": format!("zones/{zone}/instances/fx"), "priority": 1000,
                "tags": ["web"]}),
        ),
        t(
            "gce insert firewall",
            format!("{p}/global/firewalls"),
            json!({"name": "gf", "network": "global/networks/default", "sourceRanges": ["10.0.0.0/8"],
                "targetTags": ["web"], "allowed": [{"IPProtocol": "tcp", "ports": ["80", "8000-8100"]}],
                "priority": 1000, "direction": "INGRESS"}),
        ),
        t(
            "gce insert http health check",
            format!("{p}/global/httpHealthChecks"),
            json!({"name": "gh", "port": 8080, "requestPath": "/healthz", "checkIntervalSec": 8,
                "timeoutSec": 1, "healthyThreshold": 1, "unhealthyThreshold": 3}),
        ),
        t(
            "gce insert address",
            format!("{p}/regions/{region}/addresses"),
            json!({"name": "ga", "description": "d", "addressType": "EXTERNAL"}),
        ),
        t(
            "gce insert target pool",
            format!("{p}/regions/{region}/targetPools"),
            json!({"name": "gp", "instances": [format!("zones/{zone}/instances/fx")],
                "healthChecks": ["global/httpHealthChecks/fxhc"], "sessionAffinity": "NONE"}),
        ),
        t(
            "gce insert forwarding rule",
            format!("{p}/regions/{region}/forwardingRules"),
            json!({"name": "gfr", "IPProtocol": "TCP", "portRange": "8080-8081",
                "target": format!("regions/{region}/targetPools/fxpool")}),
        ),
        t(
            "gce target pool add instance",
            format!("{pool}/addInstance"),
            fx_ref.clone(),
        ),
        t(
            "gce target pool remove instance",
            format!("{pool}/removeInstance"),
            fx_ref,
        ),
    ]
}
