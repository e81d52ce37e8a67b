package placement

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

const seed004 = `
nodePools:
- name: worker
  count: 3
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
`

func cluster(t testing.TB, spec string) snapshot.Input { return builders.SnapshotInput(t, spec) }

// gpuGang makes n pods named <name>-i, each with its own unallocated claim for
// one device of class gpu.example.com (as a ResourceClaimTemplate would).
func gpuGang(in *snapshot.Input, name string, n int, cpu string) []Member {
	var ms []Member
	for i := 0; i < n; i++ {
		podName := fmt.Sprintf("%s-%d", name, i)
		pod := builders.MakePod().Namespace("ns").Name(podName).Req(corev1.ResourceCPU, cpu).ClaimTemplate("gpu", "one-gpu").Obj()
		pod.UID = types.UID(podName)
		claim := builders.Claim("ns", podName+"-gpu", "gpu.example.com", 1)
		claim.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: podName, UID: pod.UID}}
		in.Claims = append(in.Claims, claim)
		ms = append(ms, Member{Pod: pod, Claims: []types.NamespacedName{{Namespace: "ns", Name: claim.Name}}})
	}
	return ms
}

func cpuPods(name string, n int, cpu string) []Member {
	var ms []Member
	for i := 0; i < n; i++ {
		ms = append(ms, Member{Pod: builders.MakePod().Namespace("ns").Name(fmt.Sprintf("%s-%d", name, i)).Req(corev1.ResourceCPU, cpu).Obj()})
	}
	return ms
}

func placedOn(res Result) map[string]int {
	out := map[string]int{}
	for _, a := range res.Assignments {
		out[a.Node]++
	}
	return out
}

func TestSeed004DeadlockCannotHappen(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, seed004)
	a := gpuGang(&in, "a", 4, "1")
	b := gpuGang(&in, "b", 4, "1")
	snap := snapshot.New(in)
	alloc := dra.New(snap, dra.NewCache())

	resA, err := Place(ctx, snap, alloc, Unit{Members: a, MinCount: 4, Gang: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resA.Assignments) != 4 {
		t.Fatalf("gang a: want 4 placed, got %d (%v)", len(resA.Assignments), resA.Unplaced)
	}
	// Tight packing: two full nodes, the third left whole.
	if diff := cmp.Diff(map[string]int{"worker-0": 2, "worker-1": 2}, placedOn(resA)); diff != "" {
		t.Errorf("gang a placement (-want,+got):\n%s", diff)
	}
	devices := map[string]bool{}
	for _, asg := range resA.Assignments {
		if len(asg.Claims) != 1 || !asg.NewlyAllocated[0] || asg.Claims[0].Status.Allocation == nil {
			t.Fatalf("pod %s: want one newly allocated claim, got %+v", asg.Pod.Name, asg.Claims)
		}
		r := asg.Claims[0].Status.Allocation.Devices.Results[0]
		if r.Pool != asg.Node {
			t.Errorf("pod %s on %s got a device of pool %s", asg.Pod.Name, asg.Node, r.Pool)
		}
		key := r.Pool + "/" + r.Device
		if devices[key] {
			t.Errorf("device %s allocated twice", key)
		}
		devices[key] = true
	}

	before := len(snap.Allocated)
	resB, err := Place(ctx, snap, alloc, Unit{Members: b, MinCount: 4, Gang: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resB.Assignments) != 0 {
		t.Fatalf("gang b: want nothing placed (only 2 GPUs left), got %d", len(resB.Assignments))
	}
	if resB.Placeable != 2 {
		t.Errorf("gang b: want 2 placeable, got %d", resB.Placeable)
	}
	if got := len(snap.Allocated); got != before {
		t.Errorf("failed gang left %d devices allocated in the snapshot; want none added", got-before)
	}
	if len(resB.Unplaced) != 2 {
		t.Fatalf("gang b: want 2 pods explained, got %d", len(resB.Unplaced))
	}
	d := resB.Unplaced[0].Diagnosis
	if d.Reasons[ReasonDevices] != 3 || d.Nodes != 3 {
		t.Errorf("diagnosis: want all 3 nodes out of devices, got %v", d)
	}
	if diff := cmp.Diff([]string{"gpu.example.com"}, d.DeviceClasses); diff != "" {
		t.Errorf("device classes (-want,+got):\n%s", diff)
	}
}

func TestGangAllOrNothing(t *testing.T) {
	tests := map[string]struct {
		spec      string
		members   func(*snapshot.Input) []Member
		minCount  int
		bound     int
		wantPlace int
	}{
		"fits exactly": {
			spec: seed004, members: func(in *snapshot.Input) []Member { return gpuGang(in, "g", 6, "1") }, minCount: 6, wantPlace: 6,
		},
		"one too many": {
			spec: seed004, members: func(in *snapshot.Input) []Member { return gpuGang(in, "g", 7, "1") }, minCount: 7, wantPlace: 0,
		},
		"minCount below size places what fits": {
			spec: seed004, members: func(in *snapshot.Input) []Member { return gpuGang(in, "g", 8, "1") }, minCount: 5, wantPlace: 6,
		},
		"bound members count toward minCount": {
			spec: seed004, members: func(in *snapshot.Input) []Member { return gpuGang(in, "g", 2, "1") }, minCount: 4, bound: 2, wantPlace: 2,
		},
		"cpu is the limit": {
			spec: seed004, members: func(in *snapshot.Input) []Member { return cpuPods("c", 4, "7") }, minCount: 4, wantPlace: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, tc.spec)
			members := tc.members(&in)
			snap := snapshot.New(in)
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: members, MinCount: tc.minCount, Bound: tc.bound, Gang: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res.Assignments); got != tc.wantPlace {
				t.Errorf("want %d placed, got %d", tc.wantPlace, got)
			}
		})
	}
}

func TestHeterogeneousGang(t *testing.T) {
	spec := `
nodePools:
- name: big
  count: 1
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {role: leader}
  devices: [{driver: gpu.example.com, count: 2}]
- name: gpu
  count: 2
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices: [{driver: gpu.example.com, count: 2}]
`
	for _, tc := range []struct {
		name      string
		workers   int
		wantPlace int
	}{
		{"placement exists", 6, 7},
		{"no placement", 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, spec)
			// The leader needs 12 CPUs: only big-0 has them.
			leader := Member{Pod: builders.MakePod().Namespace("ns").Name("leader").Req(corev1.ResourceCPU, "12").Obj()}
			members := append(gpuGang(&in, "w", tc.workers, "2"), leader)
			snap := snapshot.New(in)
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: members, MinCount: len(members), Gang: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res.Assignments); got != tc.wantPlace {
				t.Fatalf("want %d placed, got %d: %v", tc.wantPlace, got, res.Unplaced)
			}
			for _, a := range res.Assignments {
				if a.Pod.Name == "leader" && a.Node != "big-0" {
					t.Errorf("leader on %s, want big-0", a.Node)
				}
			}
		})
	}
}

func TestFiltersAndDiagnosis(t *testing.T) {
	spec := `
nodePools:
- name: tainted
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  taints: [{key: dedicated, value: infra, effect: NoSchedule}]
- name: small
  count: 2
  capacity: {cpu: "2", memory: 4Gi, pods: "110"}
  labels: {disk: ssd}
`
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, spec)
	snap := snapshot.New(in)
	pod := builders.MakePod().Namespace("ns").Name("p").Req(corev1.ResourceCPU, "4").Obj()
	res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: []Member{{Pod: pod}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Assignments) != 0 {
		t.Fatalf("want unplaced, got %+v", res.Assignments)
	}
	want := map[string]int{"node(s) had untolerated taint {dedicated: infra}": 1, "Insufficient cpu": 2}
	if diff := cmp.Diff(want, res.Unplaced[0].Diagnosis.Reasons); diff != "" {
		t.Errorf("reasons (-want,+got):\n%s", diff)
	}
	if got, want := res.Unplaced[0].Diagnosis.String(), "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: infra}"; got != want {
		t.Errorf("message: want %q, got %q", want, got)
	}

	// Tolerating the taint makes the big node feasible; a selector for ssd excludes it again.
	tolerant := builders.MakePod().Namespace("ns").Name("t").Req(corev1.ResourceCPU, "4").Obj()
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	res, _ = Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: []Member{{Pod: tolerant}}})
	if len(res.Assignments) != 1 || res.Assignments[0].Node != "tainted-0" {
		t.Errorf("tolerating pod: want tainted-0, got %+v", res.Assignments)
	}
	selective := builders.MakePod().Namespace("ns").Name("s").Req(corev1.ResourceCPU, "1").Obj()
	selective.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	res, _ = Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: []Member{{Pod: selective}}})
	if len(res.Assignments) != 1 || res.Assignments[0].Node == "tainted-0" {
		t.Errorf("selector pod: want a small node, got %+v", res.Assignments)
	}
}

func TestSharedClaimPinsPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, seed004)
	shared := builders.Claim("ns", "shared", "gpu.example.com", 1)
	in.Claims = append(in.Claims, shared)
	var members []Member
	for i := 0; i < 3; i++ {
		pod := builders.MakePod().Namespace("ns").Name(fmt.Sprintf("p-%d", i)).Req(corev1.ResourceCPU, "1").Claim("gpu", "shared").Obj()
		members = append(members, Member{Pod: pod, Claims: []types.NamespacedName{{Namespace: "ns", Name: "shared"}}})
	}
	snap := snapshot.New(in)
	res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: members, MinCount: 3, Gang: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Assignments) != 3 {
		t.Fatalf("want 3 placed, got %d", len(res.Assignments))
	}
	on := placedOn(res)
	if len(on) != 1 {
		t.Errorf("pods sharing a claim must share its node; got %v", on)
	}
	newly := 0
	for _, a := range res.Assignments {
		if a.NewlyAllocated[0] {
			newly++
		}
	}
	if newly != 1 {
		t.Errorf("the shared claim must be allocated once, got %d allocations", newly)
	}
}

// TestSharedClaimReservationLimit: one ResourceClaim can be reserved for at
// most 256 pods. A gang sharing one claim among 300 pods places 256 when
// minCount allows it, and none — with the reason — when minCount is 300.
func TestSharedClaimReservationLimit(t *testing.T) {
	for _, tc := range []struct {
		minCount, wantPlaced int
	}{{200, 256}, {300, 0}} {
		t.Run(fmt.Sprintf("minCount %d", tc.minCount), func(t *testing.T) {
			in := cluster(t, `
nodePools:
- name: worker
  count: 4
  capacity: {cpu: "100", memory: 512Gi, pods: "110"}
`)
			// Allocated to a network-attached device: usable from every node.
			shared := builders.Claim("ns", "shared", "gpu.example.com", 1)
			shared.Status.Allocation = &resourcev1.AllocationResult{}
			in.Claims = append(in.Claims, shared)
			var ms []Member
			for i := 0; i < 300; i++ {
				pod := builders.MakePod().Namespace("ns").Name(fmt.Sprintf("p-%d", i)).Req(corev1.ResourceCPU, "1").Claim("gpu", "shared").Obj()
				pod.UID = types.UID(pod.Name)
				ms = append(ms, Member{Pod: pod, Claims: []types.NamespacedName{{Namespace: "ns", Name: "shared"}}})
			}
			snap := snapshot.New(in)
			_, ctx := ktesting.NewTestContext(t)
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: ms, MinCount: tc.minCount, Gang: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Assignments) != tc.wantPlaced {
				t.Fatalf("want %d placed, got %d", tc.wantPlaced, len(res.Assignments))
			}
			if len(res.Unplaced) == 0 || res.Unplaced[len(res.Unplaced)-1].Diagnosis.Reasons[ReasonClaimReserved] == 0 {
				t.Errorf("the pods beyond 256 must say the claim is fully reserved: %d unplaced, last: %v", len(res.Unplaced), res.Unplaced[len(res.Unplaced)-1].Diagnosis)
			}
		})
	}
}

// One node publishing an invalid pool (two slices of one pool naming the
// same device) fails allocation on that node only — the allocator's
// ErrFailedAllocationOnNode — as kube-scheduler's DynamicResources plugin
// filters the node out: a 2-node cluster places a 2-rank gang on the
// healthy node, and with the bad node alone the gang is unschedulable,
// the diagnosis counting the node with the allocator's reason, not an
// invalid-claim error for the whole unit.
func TestInvalidPoolFailsOnlyItsNode(t *testing.T) {
	const twoNodes = `
nodePools:
- name: worker
  count: 2
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
`
	for name, tc := range map[string]struct {
		nodes      int // of the two, kept in the snapshot
		wantPlaced int
	}{
		"beside a healthy node": {nodes: 2, wantPlaced: 2},
		"alone":                 {nodes: 1},
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, twoNodes)
			bad := in.Nodes[0].Name
			in.Nodes = in.Nodes[:tc.nodes]
			var slices []*resourcev1.ResourceSlice
			for _, s := range in.Slices {
				if s.Spec.NodeName == nil || *s.Spec.NodeName != bad {
					if tc.nodes == 2 {
						slices = append(slices, s)
					}
					continue
				}
				twin := s.DeepCopy()
				twin.Name += "-twin"
				s.Spec.Pool.ResourceSliceCount, twin.Spec.Pool.ResourceSliceCount = 2, 2
				slices = append(slices, s, twin)
			}
			in.Slices = slices
			members := gpuGang(&in, "g", 2, "1")
			snap := snapshot.New(in)
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: members, MinCount: 2, Gang: true})
			if err != nil {
				t.Fatalf("a node's invalid pool failed the whole unit: %v", err)
			}
			if got := placedOn(res); len(res.Assignments) != tc.wantPlaced || got[bad] != 0 {
				t.Errorf("placed %v, want %d pods and none on %s (its pool is invalid)", got, tc.wantPlaced, bad)
			}
			if tc.wantPlaced == 0 {
				if len(res.Unplaced) == 0 {
					t.Fatal("nothing placed and no failure reported")
				}
				if d := res.Unplaced[0].Diagnosis.String(); !strings.Contains(d, ReasonAllocator+"invalid resource pools were encountered") {
					t.Errorf("diagnosis %q, want the allocator's reason for the bad node", d)
				}
			}
		})
	}
}
