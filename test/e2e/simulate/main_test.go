// Package simulate runs `lockstep simulate --from-cluster` against the
// local control plane as a user bound to nothing but its read-only
// ClusterRole (docs/simulate-clusterrole.yaml): the cluster's nodes,
// ResourceSlices and DeviceClasses are read, seed 004 comes out as the demo
// shows it under each scheduler, on the cluster's own node names, and the
// cluster is left as it was; and a small trace simulated under lockstep
// starts the same jobs in the same order on the same nodes as the real
// scheduler runs them on this cluster (fidelity).
package simulate

import (
	"testing"

	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// The default cluster (3 nodes × 2 GPUs, seed 004's) with Lockstep, which
// the fidelity test compares the simulation with.
func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{})
}
