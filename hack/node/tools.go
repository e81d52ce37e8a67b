//go:build tools

// Package node pins the container runtime of `lockstep dev up --real-nodes`:
// containerd, its runc shim and ctr (which imports the locally built images),
// built from the Go module proxy like the control-plane binaries.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
