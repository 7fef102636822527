//go:build tools

// Package tools pins the Kubernetes control-plane commands winpool's tests run.
// k8s.io/kubernetes cannot be `go install`ed directly (its go.mod replaces the
// staging modules with local paths), so this module requires it and maps every
// staging module to its published release.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
