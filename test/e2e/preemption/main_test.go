// Package preemption checks gang preemption on the local control plane (eks
// profile, no feature gate): a higher-priority gang takes the GPUs (DRA) or
// example.com/accel (extended resource) of a lower-priority gang, which goes
// whole (disruptionMode all) or only as far as needed (single), waits whole,
// and runs again; equal or higher priority, preemptionPolicy Never and a
// preemption that cannot make room evict nothing.
package preemption

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(clusterspec.PreemptionYAML)})
}
