// Package operators checks Lockstep beside the real operators of the
// training and serving frameworks users run — Kubeflow's training operator
// (PyTorchJob) and MPI operator (MPIJob v2), and KubeRay (RayCluster,
// RayJob) — each built from the Go module proxy at a pinned version
// (hack/integrations), creating their pods as they do in a cluster. Each
// kind's jobs become gangs with nothing Lockstep-specific but
// schedulerName. The cluster is 4 nodes × 2 GPUs whose GPUs carry a clique
// attribute (worker-0 and -1 clique 0, worker-2 and -3 clique 1), and one
// CPU node (cpu-0, no devices) tainted so only pods that ask for the CPU
// pool go there (eks profile: no feature gate).
package operators

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const clusterYAML = `nodePools:
- name: worker
  count: 4
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {pool: gpu}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes:
      clique: {int: "{{div .NodeIndex 2}}"}
- name: cpu
  count: 1
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {pool: cpu}
  taints: [{key: example.com/cpu-pool, effect: NoSchedule}]
`

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{
		Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(clusterYAML),
		Controllers: []harness.Controller{harness.TrainingOperatorController, harness.MPIOperatorController, harness.KubeRayController},
	})
}
