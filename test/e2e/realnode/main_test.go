// Package realnode checks Lockstep's gangs on real nodes (`lockstep dev up
// --real-nodes 2`): a kubelet v1.37 and containerd per node run the ranks as
// real containers (lockstep.local/rank), and the simulated-GPU DRA driver,
// a real kubelet plugin, prepares the devices Lockstep allocated and injects
// them through CDI. A gang binds whole and each rank sees exactly its
// claim's devices; a gang that cannot fit holds no prepared device;
// preemption stops the victim's processes and the preemptor starts on the
// freed devices; a rank that crashes, or a device the driver reports
// unhealthy (allocatedResourcesStatus, written by the kubelet), restarts the
// gang whole; the driver restarting loses nothing; and stopping a cluster
// with real nodes, or failing to start one, leaves no process, mount, cgroup
// or bridge behind. The simulated nodes of the default cluster are there
// too; the tests' ranks select the real ones.
package realnode

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// realNodes × gpusPerNode are the devices the tests' ranks can get.
const (
	realNodes   = 2
	gpusPerNode = 2
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, RealNodes: realNodes, RealNodeGPUs: gpusPerNode})
}
