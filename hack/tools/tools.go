//go:build tools

// Package tools pins the development tools `make build`, `make generate`,
// `make verify` and `make image` compile into bin/: kwok (the node simulator
// of the local control plane), controller-gen (deepcopy and CRD YAML for
// api/), client-gen (the typed client of api/), helm (lint and render the
// chart) and ociimage (this module's image builder, on go-containerregistry).
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/code-generator/cmd/client-gen"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
