# shellcheck shell=bash
# Which layouts each cloud's demo runs in (hack/local-up.sh refuses the others;
# hack/update-diagrams.sh draws these; hack/test.sh runs these): both, except a cloud whose
# upstream provider never had an external layout. (rackspace's never had one either, but its
# deploy overlay runs hypercloud's cloud-controller-manager with it, so its demo shows both.)

# cloud_modes CLOUD: the layouts, space-separated.
cloud_modes() {
  case "$1" in
    mesos|ovirt|photon) echo in-tree ;;
    *) echo in-tree external ;;
  esac
}

# cloud_modes_why CLOUD: why a cloud has one layout only (empty for the others).
cloud_modes_why() {
  case "$1" in
    mesos) echo "upstream's mesos provider was removed (v1.8) before any cloud-controller-manager existed" ;;
    ovirt) echo "upstream's ovirt provider was removed for v1.14 (kubernetes#72178), and Kubernetes never published an external oVirt cloud-controller-manager" ;;
    photon) echo "upstream's photon provider was removed for v1.14 (kubernetes#72178) after VMware discontinued Photon Controller, and no external Photon cloud-controller-manager ever existed" ;;
  esac
}
