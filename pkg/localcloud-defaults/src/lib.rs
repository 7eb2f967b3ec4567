//! The local cloud's well-known defaults: what a fresh `hypercloud local-cloud serve` listens on,
//! which credentials it accepts and what it is seeded with. The `local` provider uses these so
//! the demo needs no configuration (DevStack's `local.conf` defaults play the same role). A crate
//! of its own, below both, so that the provider (`pkg/providers/openstack`) does not depend on
//! the local cloud (`pkg/localcloud`, which re-exports it as `hypercloud_localcloud::defaults`).

use std::path::PathBuf;

/// The API address: one port, DevStack-style path prefixes per service.
pub const API_LISTEN: &str = "127.0.0.1:8800";
/// The metadata service address (the role of 169.254.169.254).
pub const METADATA_LISTEN: &str = "127.0.0.1:8801";
/// Path prefixes of the services under the API address.
pub const IDENTITY_PATH: &str = "/identity";
pub const COMPUTE_PATH: &str = "/compute/v2.1";
pub const NETWORK_PATH: &str = "/network";
pub const VOLUME_PATH: &str = "/volume/v3";
/// Reserved for part 2 (Octavia).
pub const LOAD_BALANCER_PATH: &str = "/load-balancer";

pub const REGION: &str = "RegionOne";
pub const USER: &str = "admin";
pub const PASSWORD: &str = "hypercloud";
pub const PROJECT: &str = "demo";
/// Keystone's default domain: name `Default`, ID `default`.
pub const DOMAIN: &str = "Default";
pub const DOMAIN_ID: &str = "default";

/// The tenant network every instance joins unless told otherwise. Its subnet lies in loopback
/// (127.0.0.0/8 is all local on Linux, no configuration needed), so an instance's fixed address
/// is a real address of this machine: a Node's InternalIP can be bound by a stand-in for
/// kube-proxy's NodePort listener, and a load balancer member on it really receives traffic.
/// Nothing else about instances is real: no VM boots. A /16, so that benchmarks with thousands
/// of nodes fit; the first instances get 127.1.0.2, 127.1.0.3, ...
pub const NETWORK: &str = "private";
pub const SUBNET: &str = "private-subnet";
pub const SUBNET_CIDR: &str = "127.1.0.0/16";
/// The external network floating IPs come from (DevStack's `public`).
pub const PUBLIC_NETWORK: &str = "public";
pub const PUBLIC_SUBNET: &str = "public-subnet";
pub const PUBLIC_SUBNET_CIDR: &str = "127.24.4.0/24";
/// The router joining `private` to `public`.
pub const ROUTER: &str = "router1";

pub const AVAILABILITY_ZONE: &str = "nova";
pub const FLAVOR: &str = "m1.small";
/// Keystone's default token lifetime.
pub const TOKEN_TTL_SECS: u64 = 3600;

/// A flavor as Nova lists it.
#[derive(Debug, Clone, Copy)]
pub struct Flavor {
    pub id: &'static str,
    pub name: &'static str,
    pub vcpus: u32,
    pub ram_mb: u32,
    pub disk_gb: u32,
}

/// DevStack's flavors.
pub const FLAVORS: &[Flavor] = &[
    Flavor {
        id: "1",
        name: "m1.tiny",
        vcpus: 1,
        ram_mb: 512,
        disk_gb: 1,
    },
    Flavor {
        id: "2",
        name: "m1.small",
        vcpus: 1,
        ram_mb: 2048,
        disk_gb: 20,
    },
    Flavor {
        id: "3",
        name: "m1.medium",
        vcpus: 2,
        ram_mb: 4096,
        disk_gb: 40,
    },
    Flavor {
        id: "4",
        name: "m1.large",
        vcpus: 4,
        ram_mb: 8192,
        disk_gb: 80,
    },
    Flavor {
        id: "5",
        name: "m1.xlarge",
        vcpus: 8,
        ram_mb: 16384,
        disk_gb: 160,
    },
];

/// An Octavia flavor (an operator's object: Octavia ships none). `topology` is what its
/// flavor profile would say (`SINGLE` or `ACTIVE_STANDBY` amphorae); the local cloud's data
/// plane forwards the same way for both.
#[derive(Debug, Clone, Copy)]
pub struct LbFlavor {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub enabled: bool,
    pub flavor_profile_id: &'static str,
}

/// The local cloud's Octavia flavors, as a small deployment defines them: one amphora, an
/// active/standby pair, and a retired flavor left disabled (Octavia refuses it for new load
/// balancers).
pub const LB_FLAVORS: &[LbFlavor] = &[
    LbFlavor {
        id: "6f3a1c2e-9b1d-4c55-8d1e-2a4f0c7b5e01",
        name: "amphora-single",
        description: "One amphora (topology SINGLE)",
        enabled: true,
        flavor_profile_id: "0b1c9e52-6a2f-4f0e-9d3c-1e7a5b8c4d01",
    },
    LbFlavor {
        id: "6f3a1c2e-9b1d-4c55-8d1e-2a4f0c7b5e02",
        name: "amphora-ha",
        description: "An active/standby pair of amphorae (topology ACTIVE_STANDBY)",
        enabled: true,
        flavor_profile_id: "0b1c9e52-6a2f-4f0e-9d3c-1e7a5b8c4d02",
    },
    LbFlavor {
        id: "6f3a1c2e-9b1d-4c55-8d1e-2a4f0c7b5e03",
        name: "amphora-retired",
        description: "Retired: not allowed for new load balancers",
        enabled: false,
        flavor_profile_id: "0b1c9e52-6a2f-4f0e-9d3c-1e7a5b8c4d01",
    },
];

/// `$HOME/.local/share/hypercloud/local-cloud`, or `None` without `$HOME`.
pub fn state_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".local/share/hypercloud/local-cloud"))
}

/// An image as Glance lists it (no data behind it).
#[derive(Debug, Clone, Copy)]
pub struct Image {
    pub id: &'static str,
    pub name: &'static str,
    pub size: u64,
}

/// DevStack's default image.
pub const IMAGES: &[Image] = &[Image {
    id: "8a3e1f3c-6a4b-4c5e-9f0a-2b7d1c9e4f60",
    name: "cirros-0.6.2-x86_64-disk",
    size: 21_430_272,
}];

pub const IMAGE_PATH: &str = "/image";

/// The Azure dialect's one Microsoft Entra tenant (`tenantId` of azure.json; the token
/// endpoint is `/{tenant}/oauth2/v2.0/token`). Its Keystone domain is [`DOMAIN`].
pub const AZURE_TENANT_ID: &str = "6c6f6361-6c63-6c6f-7564-74656e616e74";
