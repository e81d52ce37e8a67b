// Package audit runs `lockstep audit` against the local control plane as a
// user bound to nothing but its read-only ClusterRole: seed 004's partial
// start under kube-scheduler pod by pod is found with its held
// device-hours and its deadlock, and a healthy Job, a Lockstep gang
// running whole and one waiting whole are not reported.
package audit

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// cluster is 5 nodes × 2 GPUs: 2 for a Lockstep gang, 2 for a healthy Job
// of kube-scheduler, and seed 004's 6 for its two 4-rank Jobs.
const cluster = `
nodePools:
- name: worker
  count: 5
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
`

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{
		Profile:    devcluster.ProfileEKS,
		Spec:       harness.MustParseSpec(cluster),
		Schedulers: []devcluster.Scheduler{devcluster.SchedulerKube, devcluster.SchedulerLockstep},
	})
}
