// Package crash proves the scheduler's crash safety and failover on the
// local control plane: it runs its own scheduler replicas (the cluster starts
// none), kills them at chosen points, and checks that no gang is left half
// bound and no device is left allocated to a pod that is not bound. It also
// restarts the API server under bound gangs with its own controllers'
// pod informer held behind, and checks that no gang is recorded lost.
package crash

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// 8 nodes × 8 GPUs: room for one 64-rank gang.
const spec = `
nodePools:
- name: gpu
  count: 8
  capacity: {cpu: "64", memory: 512Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 8
`

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(spec), Schedulers: []devcluster.Scheduler{}})
}
