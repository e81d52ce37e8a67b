//go:build tools

// Package tools pins the development tools `make build` and `make generate`
// compile into bin/: kwok (the node simulator of the local control plane) and
// controller-gen (deepcopy and CRD YAML for api/).
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
