// Package gang checks Lockstep's scheduler core on the local control plane
// (eks profile: no feature gate on): the seed 004 deadlock cannot happen,
// gangs are all or nothing, heterogeneous gangs are placed when they can be,
// and lone pods are filtered as kube-scheduler filters them.
package gang

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS})
}
