#!/usr/bin/env bash
# The one command that runs every test of hypercloud (README: "Run all the tests").
# .ci/run calls exactly this. Build outputs are cached outside the clone so repeat runs are fast.
set -euo pipefail
cd "$(dirname "$0")/.."

export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"
mkdir -p "$HYPERCLOUD_CACHE"

# Each step's wall time, printed as a table at the end (and on failure: which step failed, after
# how long) and written to $HYPERCLOUD_CACHE/test-steps.tsv, so every change can state its CI cost.
steps_file="$HYPERCLOUD_CACHE/test-steps.tsv"
step_names=()
step_secs=()
step_name=""
step_start=$SECONDS
run_start=$SECONDS
step_close() {
	[ -n "$step_name" ] || return 0
	step_names+=("$step_name")
	step_secs+=($((SECONDS - step_start)))
	step_name=""
}
step() {
	step_close
	step_name="$*"
	step_start=$SECONDS
	printf '\n==> %s\n' "$*"
}
step_table() {
	local status=$1 i total=$((SECONDS - run_start))
	{
		printf '# hack/test.sh %s, %s, commit %s\n' "$status" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
			"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
		printf 'seconds\tstep\n'
		for i in "${!step_names[@]}"; do printf '%s\t%s\n' "${step_secs[$i]}" "${step_names[$i]}"; done
		printf '%s\t%s\n' "$total" "total"
	} >"$steps_file.tmp" && mv "$steps_file.tmp" "$steps_file"
	printf '\n==> step times (%s; also in %s)\n' "$status" "$steps_file" >&2
	for i in "${!step_names[@]}"; do printf '%6ss  %s\n' "${step_secs[$i]}" "${step_names[$i]}" >&2; done
	printf '%6ss  total (%dm%02ds)\n' "$total" $((total / 60)) $((total % 60)) >&2
}
on_exit() {
	local rc=$?
	if [ "$rc" -ne 0 ] && [ -n "$step_name" ]; then
		printf 'hack/test.sh: step failed after %ss: %s\n' $((SECONDS - step_start)) "$step_name" >&2
		step_close
		step_table "failed (exit $rc)" || true
	fi
	if [ -n "${envtest_started:-}" ]; then stop_envtest "$rc"; fi
}
trap on_exit EXIT

step "cargo fmt --check"
cargo fmt --all -- --check

# With the features that build the examples (benchmark drivers, the local cloud's stand-alone
# CLI), which `cargo test` skips, so they are linted too.
step "cargo clippy (all targets, -D warnings)"
cargo clippy --workspace --all-targets --locked --features hypercloud/bench,hypercloud-localcloud/examples,hypercloud-providers-vsphere/bench -- -D warnings

step "cargo doc (our crates, rustdoc -D warnings: broken links, bad HTML in doc comments)"
RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps --locked

step "hack/verify-architecture.sh (docs/architecture.md's crate graph against Cargo.toml)"
hack/verify-architecture.sh

step "hack/verify-docs.sh (the docs' lists against the code, the paths they name)"
hack/verify-docs.sh

# Supply chain: licences, banned crates and sources of every dependency (deny.toml), with the
# pinned cargo-deny (built once into $HYPERCLOUD_CACHE/cargo-deny; advisories are not checked:
# their database cannot be fetched here).
step "cargo deny check licenses bans sources (hack/deny.sh; cargo-deny cached under $HYPERCLOUD_CACHE/cargo-deny)"
hack/deny.sh

# --- real servers the integration tests need (each script installs what it needs) ---
# (envtest: kube-apiserver + etcd; python tools: openstackclient) are added here by their issues.

# envtest: a real kube-apiserver + etcd (hack/envtest.sh; built once per version into the cache).
# A run dir of our own, so a control plane started by hand or by another hack/test.sh is left alone;
# stopped on exit by the trap, and by envtest's watchdog should this shell die without running it.
step "envtest: build kube-apiserver + etcd (cached under $HYPERCLOUD_CACHE/envtest/bin)"
hack/envtest.sh build
# The rest of the cluster: upstream kube-controller-manager + kube-scheduler and kwok
# (hack/cluster.sh; built once per version into the cache), for the e2e scenarios and local-up.
step "cluster: build kube-controller-manager, kube-scheduler, kwok (cached under $HYPERCLOUD_CACHE/cluster/bin)"
hack/cluster.sh build
# kubectl at the apiserver's version (same module graph): deploy_manifests.rs renders every
# kustomization under deploy/ with it and applies each with --dry-run=server.
step "kubectl: hack/envtest.sh build-kubectl (cached under $HYPERCLOUD_CACHE/kubectl)"
HYPERCLOUD_KUBECTL="$(hack/envtest.sh build-kubectl)"
export HYPERCLOUD_KUBECTL
# helm (HELM_VERSION, go install from the module proxy): deploy_manifests.rs lints the chart
# deploy/helm/hypercloud, renders it for every cloud and installs it with --dry-run=server.
step "helm: build (cached under $HYPERCLOUD_CACHE/helm)"
HYPERCLOUD_HELM="$(hack/helm.sh)"
export HYPERCLOUD_HELM

step "envtest: start kube-apiserver + etcd"
export HYPERCLOUD_ENVTEST_DIR="$HYPERCLOUD_CACHE/envtest/runs/test-sh-$$"
stop_envtest() {
	local rc=$1
	hack/envtest.sh stop || true
	if [ "$rc" -eq 0 ]; then rm -rf "$HYPERCLOUD_ENVTEST_DIR"; else echo "envtest logs: $HYPERCLOUD_ENVTEST_DIR" >&2; fi
}
envtest_started=1
envtest_env="$(HYPERCLOUD_ENVTEST_OWNER_PID=$$ hack/envtest.sh start)"
eval "$envtest_env"

# python tools: the pinned official openstack CLI and openstacksdk in $HYPERCLOUD_CACHE/venv (hack/python-tools.sh;
# a no-op when already installed), driven against the local cloud by cmd/hypercloud/tests/local_cloud_*.rs
# (local_cloud_openstacksdk.rs runs hack/conformance/openstacksdk_conformance.py).
step "python tools: python-openstackclient + openstacksdk (venv in $HYPERCLOUD_CACHE/venv)"
hack/python-tools.sh

# gce tools: Google's google-cloud-compute client (hack/python-tools.sh gce, venv
# $HYPERCLOUD_CACHE/venv-gce), driven against the local cloud's GCE dialect by
# cmd/hypercloud/tests/it/local_cloud_gce.rs (hack/conformance/gce_conformance.py).
step "gce tools: google-cloud-compute (venv in $HYPERCLOUD_CACHE/venv-gce)"
hack/python-tools.sh gce

# azure tools: Microsoft's Azure SDK (hack/python-tools.sh azure, venv $HYPERCLOUD_CACHE/venv-azure),
# driven against the local cloud's Azure dialect by pkg/localcloud/tests/it/azure.rs
# (hack/conformance/azure_conformance.py). Cold about 15 s, warm under a second.
step "azure tools: azure-identity, azure-mgmt-resource, -compute, -network (venv in $HYPERCLOUD_CACHE/venv-azure)"
hack/python-tools.sh azure
# The az CLI, in a venv of its own (it pins older SDK packages), driven by azure.rs
# (hack/conformance/azure_cli_conformance.py). Cold about 60 s (733 MB), warm under a second.
step "azure cli: azure-cli (venv in $HYPERCLOUD_CACHE/venv-azure-cli)"
hack/python-tools.sh azure-cli

# ovirt tools: oVirt's Python SDK (hack/python-tools.sh ovirt, venv $HYPERCLOUD_CACHE/venv-ovirt),
# driven against the local cloud's oVirt dialect by pkg/localcloud/tests/it/ovirt.rs
# (hack/conformance/ovirt_sdk_conformance.py). Cold about 20 s, warm under a second.
step "ovirt tools: ovirt-engine-sdk-python (venv in $HYPERCLOUD_CACHE/venv-ovirt)"
hack/python-tools.sh ovirt
# rackspace tools: Rackspace's keystoneauth plugin with openstacksdk (hack/python-tools.sh
# rackspace, venv $HYPERCLOUD_CACHE/venv-rackspace), signing in with an API key to the local
# cloud's Keystone v2.0 in pkg/localcloud/tests/it/rackspace.rs
# (hack/conformance/rackspace_conformance.py). Cold about 10 s, warm under a second.
step "rackspace tools: rackspaceauth and openstacksdk (venv in $HYPERCLOUD_CACHE/venv-rackspace)"
hack/python-tools.sh rackspace
# cloudstack tools: Exoscale's CloudStack client cs (hack/python-tools.sh cloudstack, venv
# $HYPERCLOUD_CACHE/venv-cloudstack), signing and polling jobs against the local cloud's
# CloudStack dialect in pkg/localcloud/tests/it/cloudstack.rs
# (hack/conformance/cloudstack_conformance.py). Cold a few seconds, warm under a second.
step "cloudstack tools: cs (venv in $HYPERCLOUD_CACHE/venv-cloudstack)"
hack/python-tools.sh cloudstack

# aws tools: moto server and the official aws CLI (hack/python-tools.sh aws, venv
# $HYPERCLOUD_CACHE/venv-aws) and Amazon's amazon-ec2-metadata-mock (built from the Go module
# proxy); the aws provider's tests run against them (pkg/testenv/src/aws.rs).
step "aws tools: moto, awscli, amazon-ec2-metadata-mock (hack/aws-tools.sh)"
hack/aws-tools.sh install >/dev/null

# vcsim and govc (VMware's vCenter simulator and CLI, govmomi GOVMOMI_VERSION) for the vsphere
# provider's tests and compare-modes run; built once into $HYPERCLOUD_CACHE/govmomi/bin.
step "vcsim + govc (hack/vcsim.sh build; cached under $HYPERCLOUD_CACHE/govmomi/bin)"
hack/vcsim.sh build

# The upstream CSI tools (CSI_*_VERSION in hack/versions.env, from the Go module proxy): csi-sanity
# judges the csi-driver personality, the sidecars drive it against the real apiserver. Cold about
# 12 min on 2 idle cores (each sidecar builds its own k8s.io libraries), warm under a second.
step "csi tools: csi-sanity, csi-provisioner, csi-attacher, csi-resizer (hack/csi-tools.sh build; cached under $HYPERCLOUD_CACHE/csi-tools)"
hack/csi-tools.sh build
HYPERCLOUD_CSI_TOOLS_BIN="$(hack/csi-tools.sh bin)"
export HYPERCLOUD_CSI_TOOLS_BIN

# The trace view's browser test: Debian's chromium and playwright-core (PLAYWRIGHT_CORE_VERSION,
# npm) for hack/lib/ui-check.mjs, which compare-modes --ui below runs (hack/ui-tools.sh; cold
# about a minute, warm under a second).
step "ui tools: chromium + playwright-core (hack/ui-tools.sh install; cached under $HYPERCLOUD_CACHE/ui-tools)"
hack/ui-tools.sh install

# promlint: `promtool check metrics`' linter (client_golang testutil/promlint), which
# ccm_runtime.rs runs on /metrics (hack/promlint.sh; built once per version into the cache).
step "promlint (hack/promlint.sh; cached under $HYPERCLOUD_CACHE/promlint)"
hack/promlint.sh >/dev/null

# Includes the property tests (proptest; case counts fixed in the code, ~11k cases, a few seconds)
# and cmd/hypercloud/tests/it/fault_proxy.rs (the CCM behind a proxy answering 429/5xx).
# With hypercloud's `bench` feature, which also builds the bench driver
# (cmd/hypercloud/examples/bench_ccm_nodes.rs) that the hack/bench smokes below run.
step "cargo test (unit + integration)"
cargo test --workspace --locked --no-fail-fast --features hypercloud/bench
# The binary that build made; local-up uses it rather than `cargo build -p hypercloud`, whose
# different feature resolution would compile the AWS SDK crates again (minutes).
export HYPERCLOUD_BIN="$CARGO_TARGET_DIR/debug/hypercloud"

# The container image as an OCI archive without a daemon (release build, crane), checked as a
# client sees it, run under each personality symlink in a chroot, and built twice for the digest.
step "container image: hack/image.sh build, verify, reproduce"
image_start=$SECONDS
archive="$(hack/image.sh build)"
hack/image.sh verify "$archive"
hack/image.sh reproduce "$archive"
echo "container image: $((SECONDS - image_start))s"

# The README's main command, non-interactive, in both layouts: compare-modes runs
# hack/local-up.sh --smoke in-tree and external, asserts each reaches "curl through the load
# balancer succeeded", and fails on any difference between the layouts upstream does not have.
# --ui: each run also serves the live trace view, which headless Chromium watches and
# hack/lib/ui-check.mjs checks; then both runs side by side (`trace serve --compare`).
step "hack/compare-modes.sh --ui (hack/local-up.sh --smoke --ui in both layouts, then diff; the trace view in Chromium)"
hack/compare-modes.sh --ui --dir "$HYPERCLOUD_CACHE/compare-modes-ci"
# The same against vcsim with --cloud-provider=vsphere (no load balancer step: vSphere has none).
step "hack/compare-modes.sh --cloud vsphere (vcsim instead of the local cloud)"
hack/compare-modes.sh --cloud vsphere --dir "$HYPERCLOUD_CACHE/compare-modes-vsphere-ci"
# The same against moto and Amazon's EC2 metadata mock with --cloud-provider=aws (the classic
# ELB checked with `aws elb describe-load-balancers` and curled through local-cloud --follow-aws-elb).
step "hack/compare-modes.sh --cloud aws (moto + amazon-ec2-metadata-mock instead of the local cloud)"
hack/compare-modes.sh --cloud aws --dir "$HYPERCLOUD_CACHE/compare-modes-aws-ci"
# The same against the local cloud's Compute Engine dialect and GCE metadata server with
# --cloud-provider=gce (the load balancer a forwarding rule to a target pool, curled through).
step "hack/compare-modes.sh --cloud gce (the local cloud as a GCE project)"
gce_start=$SECONDS
hack/compare-modes.sh --cloud gce --dir "$HYPERCLOUD_CACHE/compare-modes-gce-ci"
echo "compare-modes --cloud gce: $((SECONDS - gce_start))s"
# The same against the local cloud's Azure Resource Manager dialect (its own CA, Entra sign-in)
# with --cloud-provider=azure (the load balancer a frontend of the cluster's Standard load
# balancer, curled through; the in-tree volume step a managed disk attached by LUN).
step "hack/compare-modes.sh --cloud azure (the local cloud as an Azure subscription)"
hack/compare-modes.sh --cloud azure --dir "$HYPERCLOUD_CACHE/compare-modes-azure-ci"
# The same against the local cloud's Apache CloudStack dialect with --cloud-provider=cloudstack
# (the admin's API keys from `local-cloud cloudstack-keys`, requests signed; the load balancer a
# public IP with a load-balancer rule and a firewall rule from loadBalancerSourceRanges, curled
# through; no volume step: upstream had no CloudStack volume plugin; ~70 s).
step "hack/compare-modes.sh --cloud cloudstack (the local cloud as a CloudStack account)"
hack/compare-modes.sh --cloud cloudstack --dir "$HYPERCLOUD_CACHE/compare-modes-cloudstack-ci"
# Credentials as a cluster holds them (#35): the local cloud's password only in the Secret
# kube-system/hypercloud-cloud-credentials, which every personality reads and follows, rotated
# to an application credential mid-run (external layout, two Nodes: with one, the upstream
# node-lifecycle controller sees a full disruption and adds no NoExecute taint; ~40 s).
step "hack/local-up.sh --smoke --creds secret (cloud credentials from a Secret, rotated mid-run)"
hack/local-up.sh --smoke --creds secret --nodes 2 --dir "$HYPERCLOUD_CACHE/local-up-creds-ci"
# Several vCenters (#35): two vcsims (127.0.0.1 and 127.0.0.2) in one vsphere.conf, the Nodes
# spread over them, each Node's zone from its own vCenter, the in-tree volume provisioned on the
# workspace vCenter and attached to its Node's VM (~45 s).
step "hack/local-up.sh --smoke --cloud vsphere --vcenters 2 --mode in-tree (two vCenters)"
hack/local-up.sh --smoke --cloud vsphere --vcenters 2 --mode in-tree --dir "$HYPERCLOUD_CACHE/local-up-vsphere2-ci"
# The mesos provider in its one layout (#37): the local cloud's servers as the agents of a Mesos
# master (its /state), the in-tree kubelet-helpers register the agents as Nodes, a stopped
# agent's Node gets the shutdown taint; its diagram is verified below.
step "hack/local-up.sh --smoke --cloud mesos --mode in-tree (the Mesos dialect)"
hack/local-up.sh --smoke --cloud mesos --mode in-tree --dir "$HYPERCLOUD_CACHE/local-up-mesos-ci/in-tree"
# The ovirt provider in its one layout: the local cloud's servers as the VMs of an oVirt engine
# (its v3 API, basic authentication, [filters] vms = name=node-*), the in-tree kubelet-helpers
# register them as Nodes named by their guests' FQDNs, a stopped VM's Node gets the shutdown
# taint (~35 s); its diagram is verified below.
step "hack/local-up.sh --smoke --cloud ovirt --mode in-tree (the oVirt dialect)"
hack/local-up.sh --smoke --cloud ovirt --mode in-tree --dir "$HYPERCLOUD_CACHE/local-up-ovirt-ci/in-tree"
# The photon provider in its one layout: the local cloud's servers as the VMs of a Photon
# Controller project (its /v1 REST API, no tokens; the legacy [Global] target/project), the
# in-tree kubelet-helpers register them as Nodes named by the VMs, a kubernetes.io/photon-pd disk
# provisioned for a claim and attached to its pod's VM through Photon tasks, a stopped VM's Node
# gets the shutdown taint (~40 s); its diagrams are verified below.
step "hack/local-up.sh --smoke --cloud photon --mode in-tree (the Photon Controller dialect)"
hack/local-up.sh --smoke --cloud photon --mode in-tree --dir "$HYPERCLOUD_CACHE/local-up-photon-ci/in-tree"
# The rackspace provider in both layouts (compare-modes): the local cloud's Keystone v2.0 as Rackspace's
# identity (the admin's API key read from its RAX-KSKEY credentials; the legacy [Global]
# auth-url/username/api-key/region), the in-tree kubelet-helpers register its Nova servers as
# Nodes named by the servers, an existing Cinder volume's PV attached to its pod's server (no
# provisioning, as upstream's; in-tree only), a stopped server's Node gets the shutdown taint
# (~40 s a layout); its diagrams are verified below.
step "hack/compare-modes.sh --cloud rackspace (Keystone v2.0 with an API key)"
hack/compare-modes.sh --cloud rackspace --dir "$HYPERCLOUD_CACHE/compare-modes-rackspace-ci"
# The in-tree -> external load-balancer migration on one running cluster: the in-tree
# controller-manager's load balancers handed to the cloud-controller-manager by leader migration,
# adopted with their ids and floating IPs, no request through them lost, nothing orphaned; and the
# storage half: a cinder volume moved to the CSI driver by CSI migration with its data, grown and
# deleted, its volume calls against docs/diagrams/volumes-migration.mmd (~70 s; the storage half
# ~30 s of it; root: loop devices and mounts).
step "hack/migrate.sh (leader migration of the service controller, load balancers adopted; a cinder volume through CSI migration)"
hack/migrate.sh --dir "$HYPERCLOUD_CACHE/migrate-ci"
# hypercloud's CCM beside the upstream Go CCM (k8s.io/cloud-provider app + a fake answering as
# hypercloud's) at a tiny N, debug build: a smoke of the comparison, never a pass/fail on speed
# (the figures are in docs/controller-manager-runtime.md).
step "hack/bench/compare-upstream.sh 20 --services=5 (smoke)"
hack/bench/compare-upstream.sh 20 --services=5
# The service controller's LoadBalancer figures against the local cloud (docs/openstack-provider.md
# "Scale") at a tiny N, with the binary and bench driver `cargo test` built: a smoke of the
# script (ingress, deletion, cloud requests per Service), never a pass/fail on speed.
step "hack/bench/lb-services.sh 5 --nodes=2 (smoke)"
hack/bench/lb-services.sh 5 --nodes=2
# The openstack provider beside upstream's OpenStack CCM (OCCM, unpatched, hack/occm.sh, cached
# in $HYPERCLOUD_CACHE/occm; its first build ~13 min) on one local cloud at a tiny N: a smoke of
# hack/bench/lb-occm.sh (~20 s warm), never a pass/fail on speed (the figures are in
# docs/openstack-provider.md "Scale").
step "hack/bench/lb-occm.sh 3 --nodes=1 --order=hc,occm (smoke)"
hack/bench/lb-occm.sh 3 --nodes=1 --order=hc,occm
# The committed sequence diagrams of the local demo (docs/diagrams) must match what its run recorded.
step "hack/verify-diagrams.sh (the cloud calls of those runs, rendered, against docs/diagrams)"
hack/verify-diagrams.sh --from "$HYPERCLOUD_CACHE/compare-modes-ci"
# And each other cloud's (docs/diagrams/<cloud>-*, embedded in docs/guide/<cloud>.md), from its
# compare-modes run above (a second each: nothing runs again).
for cloud in vsphere aws gce azure cloudstack; do
  step "hack/verify-diagrams.sh --cloud $cloud (that run's cloud calls against docs/diagrams/$cloud-*)"
  hack/verify-diagrams.sh --cloud "$cloud" --from "$HYPERCLOUD_CACHE/compare-modes-$cloud-ci"
done
step "hack/verify-diagrams.sh --cloud mesos (its in-tree run's cloud calls against docs/diagrams/mesos-*)"
hack/verify-diagrams.sh --cloud mesos --from "$HYPERCLOUD_CACHE/local-up-mesos-ci"
step "hack/verify-diagrams.sh --cloud ovirt (its in-tree run's cloud calls against docs/diagrams/ovirt-*)"
hack/verify-diagrams.sh --cloud ovirt --from "$HYPERCLOUD_CACHE/local-up-ovirt-ci"
step "hack/verify-diagrams.sh --cloud photon (its in-tree run's cloud calls against docs/diagrams/photon-*)"
hack/verify-diagrams.sh --cloud photon --from "$HYPERCLOUD_CACHE/local-up-photon-ci"
step "hack/verify-diagrams.sh --cloud rackspace (its compare-modes runs' cloud calls against docs/diagrams/rackspace-*)"
hack/verify-diagrams.sh --cloud rackspace --from "$HYPERCLOUD_CACHE/compare-modes-rackspace-ci"

step_close
step_table passed
printf '\n==> all tests passed\n'
