// Package topology checks topology on a zoned and racked local control
// plane (eks profile: 2 zones × 2 racks × 2 nodes × 4 GPUs, a device
// attribute clique that is 0 on the even nodes and 1 on the odd ones — a
// domain no node label draws —, and a CPU node without topology labels):
// where gangs land (a preferred rack before the zone, members placed after
// admission staying in the gang's domain, a device-attribute domain,
// preemption inside one domain, a Job's annotations) and what Lockstep
// tells about domains (explain's domains of a pending rack gang, the
// scheduler's per-domain device metric, preflight's report of the keys,
// admission's warning about a key no node carries).
package topology

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const spec = `
nodePools:
- name: gpu
  count: 8
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels:
    topology.kubernetes.io/zone: "zone-{{div .Index 4}}"
    example.com/rack: "rack-{{div .Index 2}}"
  devices:
  - driver: gpu.example.com
    count: 4
    attributes:
      clique: {int: "{{mod .NodeIndex 2}}"}
- name: cpu
  count: 1
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
`

const (
	zone = "topology.kubernetes.io/zone"
	rack = "example.com/rack"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(spec)})
}
