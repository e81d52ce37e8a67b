package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// TestNominationHoldsCapacity: a nomination holds its pods' requests and
// newly allocated devices against units of lower or equal priority only,
// never against itself, and not past its deadline.
func TestNominationHoldsCapacity(t *testing.T) {
	in := builders.SnapshotInput(t, `
nodePools:
- name: worker
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
`)
	pod := builders.MakePod().Namespace("ns").Name("urgent-0").Req(corev1.ResourceCPU, "4").Obj()
	claim := builders.Claim("ns", "urgent-0-gpu", "gpu.example.com", 1)
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: "dev", Driver: "gpu.example.com", Pool: "worker-0", Device: "gpu-0",
	}}}}
	nom := &nomination{
		priority:    100,
		assignments: []placement.Assignment{{Pod: pod, Node: "worker-0", Claims: []*resourcev1.ResourceClaim{claim}, NewlyAllocated: []bool{true}}},
		deadline:    time.Now().Add(time.Minute),
	}
	cases := []struct {
		name    string
		self    queue.Key
		prio    int32
		expired bool
		held    bool
	}{
		{"lower priority sees it taken", "pg/ns/low", 50, false, true},
		{"equal priority sees it taken", "pg/ns/peer", 100, false, true},
		{"higher priority may take it", "pg/ns/higher", 200, false, false},
		{"the nominee does not block itself", "pg/ns/urgent", 100, false, false},
		{"an expired nomination holds nothing", "pg/ns/low", 50, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := nominations{}
			cp := *nom
			if tc.expired {
				cp.deadline = time.Now().Add(-time.Second)
			}
			n.set("pg/ns/urgent", &cp)
			snap := snapshot.New(in)
			n.reserve(snap, tc.self, tc.prio)
			ni := snap.Node("worker-0")
			wantCPU, wantFree := int64(0), 2
			if tc.held {
				wantCPU, wantFree = 4000, 1
			}
			if ni.Requested.MilliCPU != wantCPU || ni.FreeDevices() != wantFree {
				t.Errorf("requested cpu %dm, free devices %d; want %dm, %d", ni.Requested.MilliCPU, ni.FreeDevices(), wantCPU, wantFree)
			}
		})
	}
}
