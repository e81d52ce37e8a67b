//go:build tools

// Package tools pins the Karpenter controller the autoscaling tests run:
// Karpenter's core with its kwok cloud provider (nodes it launches are kwok
// nodes), wired by ./controller (launches that fail on command, and the
// dra-kwok-driver's ResourceSlices), built into bin/karpenter-controller by
// hack/build-tools.sh from sigs.k8s.io/karpenter at the version go.mod
// requires (a module of its own, so that its dependencies do not meet
// Lockstep's or the other controllers').
//
// v1.14.0, not v1.15.0: v1.15.0 requires go 1.26.9 and this toolchain is
// 1.26.8.
package tools

import _ "github.com/lockstep-dev/lockstep/hack/integrations/karpenter/controller"
