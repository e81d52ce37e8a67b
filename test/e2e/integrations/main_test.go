// Package integrations checks Lockstep beside the real controllers of the
// projects it integrates, each built from the Go module proxy at a pinned
// version (hack/integrations): JobSets become gangs (one over every
// replicated job, or one per replicated job), so do Kubeflow Trainer's
// TrainJobs (which run as JobSets), each LeaderWorkerSet replica
// is a gang, and Kueue decides when a
// workload may start while Lockstep decides where, all or nothing. The
// cluster is 2 racks of 2 nodes × 2 GPUs (eks profile: no feature gate).
package integrations

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const clusterYAML = `nodePools:
- name: worker
  count: 4
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels:
    example.com/rack: "rack-{{div .Index 2}}"
  devices:
  - driver: gpu.example.com
    count: 2
`

// rackLabel puts worker-0 and worker-1 in rack-0, worker-2 and worker-3 in rack-1.
const rackLabel = "example.com/rack"

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{
		Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(clusterYAML),
		// JobSet first: Trainer runs TrainJobs as JobSets, and Kueue's
		// JobSet and TrainJob integrations need their CRDs.
		Controllers: []harness.Controller{harness.JobSetController, harness.TrainerController, harness.LWSController, harness.KueueController},
	})
}
