//go:build tools

// Package tools records the upstream commands hack/envtest.sh builds from this
// module, so `go mod tidy` keeps their dependencies in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
