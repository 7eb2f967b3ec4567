//go:build tools

// Package tools records the upstream commands hack/cluster.sh builds from this
// module (the same module graph as hack/tools/envtest, so the controller manager
// and scheduler match the kube-apiserver), so `go mod tidy` keeps their
// dependencies in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
