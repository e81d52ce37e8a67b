// Package jobs checks the Job integration and the admission webhooks on the
// local control plane (eks profile: no feature gate): plain Indexed Jobs
// become gangs, bad manifests are refused with a message saying what to
// change, and risky ones get warnings.
package jobs

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS})
}
