//go:build tools

// Package tools pins the jobset controller the integration tests run: built
// from the Go module proxy into bin/ by hack/build-tools.sh at the version
// go.mod requires (a module of its own, so that its dependencies do not
// meet the other controllers'; hack/align builds it on Lockstep's Kubernetes
// libraries, which it compiles and passes its tests with).
package tools

import _ "sigs.k8s.io/jobset"
