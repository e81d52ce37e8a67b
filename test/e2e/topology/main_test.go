// Package topology shows, on a zoned and racked local control plane (eks
// profile: 2 zones × 2 racks × 2 nodes × 4 GPUs, and a CPU node without
// topology labels), what Lockstep tells about topology domains: explain's
// domains of a pending rack gang, the scheduler's per-domain device
// metric, preflight's report of the keys, and admission's warning about a
// key no node carries.
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
