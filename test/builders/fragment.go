package builders

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Fragment takes, on node i of in, i mod 8 of its GPUs of gpu.example.com
// (devices gpu-0…) and 4 CPUs for each, with running pods and allocated
// claims in namespace other: free GPUs scattered in runs of 1 to 8, as the
// benchmarks of the decision core run on.
func Fragment(in *snapshot.Input) {
	for i, n := range in.Nodes {
		for d := 0; d < i%8; d++ {
			name := fmt.Sprintf("busy-%d-%d", i, d)
			claim := Claim("other", name, "gpu.example.com", 1)
			claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "dev", Driver: "gpu.example.com", Pool: n.Name, Device: fmt.Sprintf("gpu-%d", d),
			}}}}
			in.Claims = append(in.Claims, claim)
			in.Pods = append(in.Pods, MakePod().Namespace("other").Name(name).Node(n.Name).Req(corev1.ResourceCPU, "4").Obj())
		}
	}
}

// FragmentedRacks is nodes nodes × 8 DRA GPUs of gpu.example.com in zones
// of 500 nodes, blocks of 250 and racks of 100 (5,000 nodes: 10 zones of 2
// blocks of 5 racks, as upstream's topology benchmark), Fragment-ed.
func FragmentedRacks(t testing.TB, nodes int) snapshot.Input {
	in := SnapshotInput(t, fmt.Sprintf(`
nodePools:
- name: gpu
  count: %d
  capacity: {cpu: "96", memory: 1Ti, pods: "110"}
  labels:
    topology.kubernetes.io/zone: "zone-{{div .Index 500}}"
    example.com/block: "block-{{div .Index 250}}"
    example.com/rack: "rack-{{div .Index 100}}"
  devices:
  - driver: gpu.example.com
    count: 8
`, nodes))
	Fragment(&in)
	return in
}
