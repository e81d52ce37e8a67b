// Package tenancy checks on the local control plane that Lockstep's API gives
// no namespace more than the API server's own admission does: a group's
// priority is its members' (no self-elevation past a PriorityClass quota,
// no cross-namespace preemption provoked by it), immutable fields stay
// immutable, membership is fixed at creation, a claim shared beyond what
// the API allows is explained, the webhook keeps up with a 1,024-pod Job,
// and each component's RBAC is exactly what its code uses.
package tenancy

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS})
}
