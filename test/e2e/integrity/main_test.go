// Package integrity checks atomic death on the local control plane: a
// running gang that loses a member (a device tainted NoExecute or reported
// Unhealthy by its kubelet, its node deleted) is restarted whole and placed
// again without consuming the Job's backoffLimit, while a NoSchedule device
// taint, or a device health Unknown, leaves it running; with disruptionMode
// single only the member on an Unhealthy device is replaced. The
// cluster is the default 3 nodes × 2 GPUs; the node-loss test puts back the
// node it deletes.
package integrity

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS})
}
