//go:build tools

// Package krew pins krew (the kubectl plugin manager) and its manifest
// validator, which test/plugin runs against the plugin manifest .krew.yaml.
// A module of its own: krew's dependencies are years older than the
// project's.
package krew

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
