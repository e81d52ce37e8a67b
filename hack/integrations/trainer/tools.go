//go:build tools

// Package tools pins Kubeflow Trainer (v2's TrainJob controller) the integration tests run: built
// from the Go module proxy into bin/ by hack/build-tools.sh at the version
// go.mod requires (a module of its own, so that its dependencies do not
// meet Lockstep's or the other controllers').
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
