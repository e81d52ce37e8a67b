package cycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

const oneNode = `
nodePools:
- name: worker
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
`

// A nomination holds its pods' requests and newly allocated devices
// against units of lower or equal priority only, never against itself,
// and not past its deadline.
func TestNominationHoldsCapacity(t *testing.T) {
	pod := builders.MakePod().Namespace("ns").Name("urgent-0").Req(corev1.ResourceCPU, "4").Obj()
	claim := builders.Claim("ns", "urgent-0-gpu", "gpu.example.com", 1)
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: "dev", Driver: "gpu.example.com", Pool: "worker-0", Device: "gpu-0",
	}}}}
	cases := []struct {
		name    string
		self    string
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
			clk := testingclock.NewFakePassiveClock(time.Unix(1e9, 0))
			st := &State{Cache: snapshot.CacheFrom(builders.SnapshotInput(t, oneNode)), CEL: dra.NewCache(), Clock: clk}
			st.Cache.Nominate("pg/ns/urgent", &snapshot.Nomination{
				Priority: 100,
				Pods:     []snapshot.NominatedPod{{Pod: pod, Node: "worker-0", Claims: []*resourcev1.ResourceClaim{claim}}},
				Deadline: clk.Now().Add(time.Minute),
			})
			if tc.expired {
				clk.SetTime(clk.Now().Add(2 * time.Minute))
			}
			snap := st.Snapshot(context.Background(), tc.self, tc.prio)
			assertHeld(t, snap, tc.held, 4000)
			// The next cycle's snapshot starts from the cache again.
			assertHeld(t, st.Snapshot(context.Background(), "pg/ns/higher", 1000), false, 0)
		})
	}
}

// A nomination rebuilt from status.nominatedNodeName (a restarted
// scheduler, or explain) holds the pod's requests and a device for its
// unallocated claim on its node, against lower priorities only; a unit that
// already holds a nomination keeps it; pods that are bound, not Lockstep's
// or not nominated restore nothing.
func TestRestoredNominationHoldsItsNode(t *testing.T) {
	in := builders.SnapshotInput(t, oneNode)
	nominated := builders.MakePod().Namespace("ns").Name("urgent-0").Scheduler("lockstep").Member("urgent").Req(corev1.ResourceCPU, "4").ClaimTemplate("gpu", "gpus").Obj()
	nominated.Status.NominatedNodeName = "worker-0"
	nominated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("urgent-0-gpu")}}
	claim := builders.Claim("ns", "urgent-0-gpu", "gpu.example.com", 1)
	in.Claims = append(in.Claims, claim)
	bound := builders.MakePod().Namespace("ns").Name("bound").Scheduler("lockstep").Node("worker-0").Obj()
	bound.Status.NominatedNodeName = "worker-0"
	other := builders.MakePod().Namespace("ns").Name("theirs").Obj()
	other.Status.NominatedNodeName = "worker-0"
	in.Pods = append(in.Pods, nominated, bound, other)

	clk := testingclock.NewFakePassiveClock(time.Unix(1e9, 0))
	st := &State{Cache: snapshot.CacheFrom(in), CEL: dra.NewCache(), Clock: clk}
	unitOf := func(p *corev1.Pod) (string, int32) { return "pg/ns/" + p.Name, 100 }
	if n := RestoreNominations(st.Cache, in.Pods, unitOf, clk.Now().Add(time.Minute)); n != 1 {
		t.Fatalf("restored %d units, want 1 (only the pending Lockstep pod with a nominated node)", n)
	}
	assertHeld(t, st.Snapshot(context.Background(), "pg/ns/low", 50), true, 4000)
	assertHeld(t, st.Snapshot(context.Background(), "pg/ns/higher", 200), false, 0)

	kept := &snapshot.Nomination{Priority: 100, Deadline: clk.Now().Add(time.Hour)}
	st.Cache.Nominate("pg/ns/urgent-0", kept)
	if n := RestoreNominations(st.Cache, in.Pods, unitOf, clk.Now().Add(time.Minute)); n != 0 || st.Cache.Nomination("pg/ns/urgent-0") != kept {
		t.Errorf("a unit's own nomination was replaced by one rebuilt from pod status")
	}
}

// assertHeld checks worker-0: cpu requested and one of its 2 devices taken
// when held. Bound pods of the base cluster request nothing.
func assertHeld(t *testing.T, snap *snapshot.Snapshot, held bool, cpu int64) {
	t.Helper()
	ni := snap.Node("worker-0")
	wantCPU, wantFree := int64(0), 2
	if held {
		wantCPU, wantFree = cpu, 1
	}
	if ni.Requested.MilliCPU != wantCPU || ni.FreeDevices() != wantFree {
		t.Errorf("worker-0: requested cpu %dm, free devices %d; want %dm, %d", ni.Requested.MilliCPU, ni.FreeDevices(), wantCPU, wantFree)
	}
}
