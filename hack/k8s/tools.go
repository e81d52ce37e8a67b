//go:build tools

// Package k8s pins the Kubernetes and etcd main packages that `make build`
// compiles into bin/. It is a separate module so that the product module never
// imports k8s.io/kubernetes.
package k8s

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
