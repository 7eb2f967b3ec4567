//! End-to-end scenarios of hypercloud (upstream: the cloud-provider parts of Kubernetes' e2e
//! suites), in `tests/it/` (one test binary, one module per scenario); this library is empty.
//!
//! Each scenario runs the real `hypercloud` binary as processes, under the personality names
//! of `hack/install-symlinks.sh`, against the real kube-apiserver + etcd of `pkg/testenv` and a
//! real `hypercloud local-cloud serve`, and checks what a cluster operator would see:
//!
//! - `tests/it/in_tree.rs`: the old layout. `kubelet-helper --cloud-provider=local` registers its
//!   Node from the cloud, `kube-controller-manager` creates a load balancer that forwards
//!   traffic, and the `apiserver-plugin` webhook (registered from
//!   `deploy/apiserver-plugin/webhooks.yaml`) labels a volume's PersistentVolume and refuses a
//!   Node without an instance.
//! - `tests/it/external.rs`: the external layout. `kubelet-helper --cloud-provider=external`
//!   registers a tainted Node, `kube-controller-manager --cloud-provider=external` makes no
//!   cloud call, and the `cloud-controller-manager` initialises the Node, creates the load
//!   balancer and labels the PersistentVolume.
//!
//! - `tests/it/instance_power.rs`: a Node follows its instance. Stopping it makes the Node
//!   NotReady with the unreachable and shutdown taints, starting it makes it Ready again, and
//!   deleting it deletes the Node.
//! - `tests/it/leader_migration_upstream.rs`: the upstream kube-controller-manager and the
//!   cloud-controller-manager hand the migrated controllers over through the migration Lease,
//!   both ways, with one load balancer in the cloud.
//!
//! All of them run in a real cluster around the apiserver (`hypercloud_testenv::cluster`): the
//! upstream kube-controller-manager (`--cloud-provider=external`) runs its non-cloud
//! controllers, and kwok plays the kubelet of each Node while its instance runs, so Nodes are
//! Ready, heartbeat, and turn NotReady as in production. The bare-apiserver tests of each
//! crate's `tests/` stay the fast integration tests.
//!
//! The tests look for the binary beside their own executable (`target/debug/hypercloud`):
//! `cargo test --workspace` builds it; with `cargo test -p hypercloud-e2e` run
//! `cargo build -p hypercloud` first. The service load-balancer controller of a scenario
//! serves every `LoadBalancer` Service of the cluster, so each scenario is a test binary of
//! its own: cargo runs test binaries one after the other.
//!
//! Start here: the in-tree and external scenarios in `tests/`, then `hypercloud-testenv`'s
//! `cluster` module, which starts the cluster around them.
//!
//! Not here: the fast tests (unit tests beside the code, each crate's integration tests against a
//! bare apiserver) or any shared helper (those are `hypercloud-testenv`'s).
