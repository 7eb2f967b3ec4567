//! Benchmark: vCenter requests per Node, against vcsim with N VMs (default 200).
//!
//! - Initialisation: the cloud-node controller's one `InstanceMetadata` per tainted Node (no
//!   provider ID yet: found by name), for every VM.
//! - Steady state: the cloud-node controller refreshes every Node's metadata every
//!   `--node-status-update-frequency` (5m, so 12 times a Node-hour); the lifecycle controller
//!   asks only about NotReady Nodes (none here). Each of the 12 rounds starts with the
//!   provider's caches dropped, as 5 minutes expire them (listing 5s, tags 5m).
//!
//! Both with the provider's listings (default) and with `cache-ttl = 0` (per-node SearchIndex
//! look-ups, as upstream's providers do). Counts every HTTP request to vCenter, SOAP and vAPI,
//! logins included (`VSphere::api_calls`).
//!
//!   cargo run -p hypercloud-providers-vsphere --features bench --example bench_requests -- [N]
#![allow(clippy::unwrap_used)]

use hypercloud_cloudprovider::{CloudConfig, Interface};
use hypercloud_providers_vsphere::VSphere;
use hypercloud_testenv::vcsim::Vcsim;
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn node(name: &str, provider_id: Option<String>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N must be a number"))
        .unwrap_or(200);
    assert!((2..=5000).contains(&n), "N must be 2..=5000");
    // vcsim puts -vm VMs in each of its two resource pools (host DC0_H0, cluster DC0_C0).
    let per_pool = n.div_ceil(2).to_string();
    let sim = Vcsim::start(&["-vm", &per_pool]);
    let vms: Vec<String> = sim
        .govc(&["find", "/DC0/vm", "-type", "m"])
        .lines()
        .map(str::to_owned)
        .take(n)
        .collect();
    eprintln!("giving {} VMs guest names and IPs with govc...", vms.len());
    std::thread::scope(|s| {
        for (t, chunk) in vms.chunks(vms.len().div_ceil(4)).enumerate() {
            let sim = &sim;
            s.spawn(move || {
                for (i, vm) in chunk.iter().enumerate() {
                    let name = vm
                        .rsplit('/')
                        .next()
                        .unwrap()
                        .to_lowercase()
                        .replace('_', "-");
                    sim.set_guest(
                        vm,
                        &name,
                        &format!("10.{}.{}.{}", 100 + t, i / 250, 1 + i % 250),
                    );
                }
            });
        }
    });
    sim.tag_zone("/DC0/host/DC0_H0/DC0_H0", "zone-a", "/DC0", "region-1");
    sim.tag_zone("/DC0/host/DC0_C0", "zone-b", "/DC0", "region-1");
    let names: Vec<String> = vms
        .iter()
        .map(|vm| vm.rsplit('/').next().unwrap().to_owned())
        .collect();

    println!(
        "vCenter requests per Node, {} VMs (vcsim), zones from tags",
        names.len()
    );
    println!(
        "{:<28} {:>22} {:>22}",
        "mode", "per Node initialised", "per Node-hour steady"
    );
    for (mode, extra) in [
        ("batched listings (default)", ""),
        ("per-node (cache-ttl = 0)", "[Hypercloud]\ncache-ttl = 0\n"),
    ] {
        let cloud = VSphere::from_cloud_config(Some(&CloudConfig {
            origin: "bench".into(),
            bytes: sim.ini_conf(extra).into_bytes(),
        }))
        .unwrap();
        cloud.initialize(None).await.unwrap();
        let v2 = cloud.instances_v2().unwrap();
        let start = cloud.api_calls();
        let mut ids = Vec::new();
        for name in &names {
            let md = v2.instance_metadata(&node(name, None)).await.unwrap();
            ids.push(md.provider_id);
        }
        let init = cloud.api_calls() - start;
        let start = cloud.api_calls();
        for _round in 0..12 {
            cloud.invalidate_cache().await;
            for (name, id) in names.iter().zip(&ids) {
                v2.instance_metadata(&node(name, Some(id.clone())))
                    .await
                    .unwrap();
            }
        }
        let hour = cloud.api_calls() - start;
        let per = |c: u64| c as f64 / names.len() as f64;
        println!(
            "{mode:<28} {:>22} {:>22}",
            format!("{:.3} ({init})", per(init)),
            format!("{:.3} ({hour})", per(hour))
        );
        cloud.logout().await.unwrap();
    }
}
