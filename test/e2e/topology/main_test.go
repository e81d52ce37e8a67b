// Package topology checks where gangs land on a zoned and racked local
// cluster (eks profile, no feature gate): a preferred rack before the
// zone, members placed after admission staying in the gang's domain, a
// domain drawn by a device attribute, and preemption inside one domain.
package topology

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// spec is 8 nodes × 2 GPUs: zones z0 (gpu-0..3) and z1 (gpu-4..7), racks
// r0..r3 of two nodes, and a device attribute clique that is 0 on the even
// nodes and 1 on the odd ones — a domain no node label draws.
const spec = `
nodePools:
- name: gpu
  count: 8
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {topology.kubernetes.io/zone: "z{{div .Index 4}}", example.com/rack: "r{{div .Index 2}}"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes:
      clique: {int: "{{mod .NodeIndex 2}}"}
`

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(spec)})
}
