// Package lifecycle checks on the local control plane that Lockstep never
// restarts a healthy gang: ranks that finish at different times (Jobs and
// bare pods) complete normally, gangs that waited for capacity and then
// bound are left alone, and resizing a gang Job keeps the ranks that stay.
// The cluster is 8 nodes × 64 CPUs × 4 GPUs, room for a 256-pod gang.
package lifecycle

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const clusterYAML = `nodePools:
- name: worker
  count: 8
  capacity: {cpu: "64", memory: 256Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 4
`

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(clusterYAML)})
}
