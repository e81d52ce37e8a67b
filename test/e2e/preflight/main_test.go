// Package preflight runs `lockstep preflight` against a local control plane
// whose simulated nodes carry Amazon EKS labels and, on one pool, both a DRA
// GPU slice and a device-plugin style extended resource for the same GPUs.
package preflight

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const spec = `
nodePools:
- name: ng
  count: 2
  capacity: {cpu: "8", memory: 32Gi, pods: "110", example.com/gpu: "2"}
  labels: {eks.amazonaws.com/nodegroup: gpu-ng}
  devices: [{driver: gpu.example.com, count: 2}]
- name: karp
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "1"}
  labels: {karpenter.sh/nodepool: spot-gpus}
- name: static
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {karpenter.sh/nodepool: reserved-gpus}
  devices: [{driver: gpu.example.com, count: 2}]
- name: auto
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {eks.amazonaws.com/compute-type: auto, karpenter.sh/nodepool: general-purpose}
- name: self
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices: [{driver: gpu.example.com, count: 2}]
`

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(spec)})
}
