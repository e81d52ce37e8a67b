//go:build tools

// Package lint pins the linters `make lint` runs — golangci-lint and
// Kubernetes' logcheck (structured logging) — which hack/build-tools.sh
// builds into bin/ at this module's versions.
package lint

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "sigs.k8s.io/logtools/logcheck"
)
