// Package upstreamprofile checks the upstream profile: a self-managed 1.37
// cluster with GenericWorkload, WorkloadWithJob and DRAWorkloadResourceClaims
// on, the reference Lockstep is compared against.
package upstreamprofile

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileUpstream})
}
