// Package trees checks scheduling trees (CompositePodGroups) on a zoned and
// racked local control plane (2 zones × 2 racks × 1 node × 4 GPUs): a tree
// placed whole with each child in one rack inside one zone, a tree that fits
// nowhere holding nothing until room appears, children of a deleted parent
// waiting instead of being scheduled flat, and the whole-tree lifecycle (a
// member loss restarts the subtree its disruptionMode ties it to, and
// nothing else).
package trees

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const spec = `
nodePools:
- name: gpu
  count: 4
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels:
    topology.kubernetes.io/zone: "zone-{{div .Index 2}}"
    example.com/rack: "rack-{{.Index}}"
  devices:
  - driver: gpu.example.com
    count: 4
`

const (
	zone = "topology.kubernetes.io/zone"
	rack = "example.com/rack"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(spec)})
}
