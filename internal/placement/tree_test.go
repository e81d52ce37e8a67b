package placement

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// twoRacks is rack r0 of 4 nodes and rack r1 of 2, each node 2 GPUs, in
// zones: z0 holds both racks, and a third rack r2 (2 nodes) is in z1.
const twoRacks = `
nodePools:
- name: a
  count: 4
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {rack: r0, zone: z0}
  devices: [{driver: gpu.example.com, count: 2}]
- name: b
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {rack: r1, zone: z0}
  devices: [{driver: gpu.example.com, count: 2}]
- name: c
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {rack: r2, zone: z1}
  devices: [{driver: gpu.example.com, count: 2}]
`

func leaf(name string, members []Member, minCount int, c topology.Constraint) *TreeNode {
	return &TreeNode{Name: "PodGroup ns/" + name, Leaf: &Unit{Members: members, MinCount: minCount, Gang: true, Topology: c}}
}

// multiGPU is n pods of name, each with one claim for gpus GPUs.
func multiGPU(in *snapshot.Input, name string, n int, gpus int64) []Member {
	ms := gpuGang(in, name, n, "1")
	for i := range ms {
		in.Claims[len(in.Claims)-n+i].Spec.Devices.Requests[0].Exactly.Count = gpus
	}
	return ms
}

// racksOf maps each leaf to the racks its assignments use.
func racksOf(snap *snapshot.Snapshot, res TreeResult) map[string][]string {
	out := map[string][]string{}
	for n, r := range res.Leaves {
		seen := map[string]bool{}
		for _, a := range r.Assignments {
			seen[snap.Node(a.Node).Node.Labels["rack"]] = true
		}
		var racks []string
		for k := range seen {
			racks = append(racks, k)
		}
		sort.Strings(racks)
		out[n.Name] = racks
	}
	return out
}

// A tree placed greedily in creation order does not fit, though it fits:
// w1 (4 ranks × 1 GPU, one rack) takes the smallest rack that holds it,
// r1, and then w2 (2 ranks × 2 GPUs, one rack) finds only r0's nodes with
// 1 GPU free each. Backtracking moves w1 to r0, and w2 fits in r1.
func TestTreeBacktracksBetweenSiblings(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, twoRacks)
	for _, n := range []string{"a-0", "a-1", "a-2", "a-3", "c-0", "c-1"} {
		takeGPUs(&in, n, map[bool]int{true: 1, false: 2}[n[0] == 'a'])
	}
	rack := topology.Constraint{Required: []string{"rack"}}
	w1 := leaf("w1", gpuGang(&in, "w1", 4, "1"), 4, rack)
	w2 := leaf("w2", multiGPU(&in, "w2", 2, 2), 2, rack)
	root := &TreeNode{Name: "CompositePodGroup ns/job", Gang: true, MinGroupCount: 2, Children: []*TreeNode{w1, w2}}

	// Creation-order greedy: w1, then w2, each in its first domain that fits.
	greedy := snapshot.New(in)
	r1, _ := Place(ctx, greedy, dra.New(greedy, dra.NewCache()), *w1.Leaf)
	r2, _ := Place(ctx, greedy, dra.New(greedy, dra.NewCache()), *w2.Leaf)
	if !Judge(*w1.Leaf, r1).Admitted || Judge(*w2.Leaf, r2).Admitted {
		t.Fatalf("the scenario does not defeat greedy placement (w1 %t, w2 %t)", Judge(*w1.Leaf, r1).Admitted, Judge(*w2.Leaf, r2).Admitted)
	}

	snap := snapshot.New(in)
	res, err := PlaceTree(ctx, snap, dra.New(snap, dra.NewCache()), root)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Admitted {
		t.Fatalf("not admitted: %+v", res.Verdicts)
	}
	want := map[string][]string{"PodGroup ns/w1": {"r0"}, "PodGroup ns/w2": {"r1"}}
	if diff := cmp.Diff(want, racksOf(snap, res)); diff != "" {
		t.Errorf("racks (-want,+got):\n%s", diff)
	}
	if n := len(res.Assignments()); n != 6 {
		t.Errorf("%d assignments, want 6", n)
	}
}

// Topology is top-down: a tree whose root must be in one zone places every
// child in that zone, each child in one rack of it.
func TestTreeChildrenStayInTheirParentsDomain(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, twoRacks)
	rack := topology.Constraint{Required: []string{"rack"}}
	w1 := leaf("w1", gpuGang(&in, "w1", 2, "1"), 2, rack)
	w2 := leaf("w2", gpuGang(&in, "w2", 4, "1"), 4, rack)
	root := &TreeNode{Name: "CompositePodGroup ns/job", Gang: true, MinGroupCount: 2, Children: []*TreeNode{w1, w2}, Topology: topology.Constraint{Required: []string{"zone"}}}
	snap := snapshot.New(in)
	res, err := PlaceTree(ctx, snap, dra.New(snap, dra.NewCache()), root)
	if err != nil || !res.Admitted {
		t.Fatalf("admitted %t, %v", res.Admitted, err)
	}
	zones := map[string]bool{}
	for _, a := range res.Assignments() {
		zones[snap.Node(a.Node).Node.Labels["zone"]] = true
	}
	if len(zones) != 1 {
		t.Errorf("children in zones %v, want one", zones)
	}
	for n, racks := range racksOf(snap, res) {
		if len(racks) != 1 {
			t.Errorf("%s in racks %v, want one", n, racks)
		}
	}
	if v := res.Verdicts[root]; !v.Counts || v.Counted != 2 || v.Domain != "zone=z0" {
		t.Errorf("root verdict %+v, want 2 of 2 counting in zone=z0", v)
	}
}

// A tree that fits nowhere places nothing and leaves the snapshot as it
// was; its verdicts say how far it got. With minGroupCount 1 of 2, the
// same tree is admitted with the child that fits.
func TestTreeAllOrNothing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, twoRacks)
	rack := topology.Constraint{Required: []string{"rack"}}
	fits := func() *TreeNode { return leaf("fits", gpuGang(&in, "fits", 2, "1"), 2, rack) }
	huge := func() *TreeNode { return leaf("huge", gpuGang(&in, "huge", 10, "1"), 10, rack) }
	for _, tc := range []struct {
		min      int
		admitted bool
	}{{2, false}, {1, true}} {
		root := &TreeNode{Name: "CompositePodGroup ns/job", Gang: true, MinGroupCount: tc.min, Children: []*TreeNode{fits(), huge()}}
		snap := snapshot.New(in)
		before := freeGPUs(snap)
		res, err := PlaceTree(ctx, snap, dra.New(snap, dra.NewCache()), root)
		if err != nil {
			t.Fatal(err)
		}
		if res.Admitted != tc.admitted {
			t.Errorf("minGroupCount %d: admitted %t, want %t", tc.min, res.Admitted, tc.admitted)
		}
		if !tc.admitted {
			if after := freeGPUs(snap); after != before {
				t.Errorf("a tree not admitted left %d GPUs free of %d", after, before)
			}
			if v := res.Verdicts[root]; v.Counted != 1 || v.Of != 2 {
				t.Errorf("root verdict %+v, want 1 of 2 counted", v)
			}
			continue
		}
		if n := len(res.Assignments()); n != 2 {
			t.Errorf("minGroupCount 1: %d assignments, want the 2 that fit", n)
		}
	}
}

func freeGPUs(snap *snapshot.Snapshot) int {
	n := 0
	for _, ni := range snap.Nodes {
		n += ni.FreeDevices()
	}
	return n
}

// A basic leaf has no minimum: it counts with what fits, even nothing, so
// a tree of a required head and a basic worker group is admitted with its
// head alone when no worker fits — and never with workers but no head
// (issue 25: a Ray worker group of minReplicas 0).
func TestTreeBasicLeafHasNoMinimum(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for name, tc := range map[string]struct {
		headGPUs, workerGPUs int64
		admitted             bool
		assigned             int
	}{
		"head and workers fit":             {headGPUs: 1, workerGPUs: 1, admitted: true, assigned: 3},
		"no worker fits: the head alone":   {headGPUs: 1, workerGPUs: 3, admitted: true, assigned: 1},
		"the head does not fit: no worker": {headGPUs: 3, workerGPUs: 1, admitted: false, assigned: 0},
	} {
		t.Run(name, func(t *testing.T) {
			in := cluster(t, twoRacks)
			head := leaf("head", multiGPU(&in, "head", 1, tc.headGPUs), 1, topology.Constraint{})
			workers := &TreeNode{Name: "PodGroup ns/workers", Leaf: &Unit{Members: multiGPU(&in, "workers", 2, tc.workerGPUs)}}
			root := &TreeNode{Name: "CompositePodGroup ns/ray", Gang: true, MinGroupCount: 2, Children: []*TreeNode{head, workers}}
			snap := snapshot.New(in)
			before := freeGPUs(snap)
			res, err := PlaceTree(ctx, snap, dra.New(snap, dra.NewCache()), root)
			if err != nil {
				t.Fatal(err)
			}
			if res.Admitted != tc.admitted {
				t.Errorf("admitted %t, want %t", res.Admitted, tc.admitted)
			}
			if n := len(res.Assignments()); n != tc.assigned {
				t.Errorf("%d assignments, want %d", n, tc.assigned)
			}
			if !tc.admitted && freeGPUs(snap) != before {
				t.Errorf("a tree not admitted left %d GPUs free of %d", freeGPUs(snap), before)
			}
		})
	}
}

// A flat unit is a tree of one leaf: PlaceTree of that tree places it
// exactly as Place does — the same assignments, the same failures and
// domain, the same admission (Judge's) and the same snapshot afterwards —
// for gangs that fit, that do not, with required and preferred topology,
// and for a basic group of which nothing fits (not admitted, where a leaf
// under a composite counts with nothing).
func TestSingleLeafTreeIsPlacedAsPlace(t *testing.T) {
	rack := topology.Constraint{Required: []string{"rack"}}
	for _, tc := range []struct {
		name string
		unit func(in *snapshot.Input) Unit
	}{
		{"gang fits", func(in *snapshot.Input) Unit {
			return Unit{Members: gpuGang(in, "g", 6, "1"), MinCount: 6, Gang: true}
		}},
		{"gang too big", func(in *snapshot.Input) Unit {
			return Unit{Members: gpuGang(in, "g", 20, "1"), MinCount: 20, Gang: true}
		}},
		{"gang in one rack", func(in *snapshot.Input) Unit {
			return Unit{Members: gpuGang(in, "g", 4, "1"), MinCount: 4, Gang: true, Topology: rack}
		}},
		{"gang no rack holds", func(in *snapshot.Input) Unit {
			return Unit{Members: gpuGang(in, "g", 10, "1"), MinCount: 10, Gang: true, Topology: rack}
		}},
		{"elastic gang, preferred rack in a zone", func(in *snapshot.Input) Unit {
			return Unit{Members: gpuGang(in, "g", 8, "1"), MinCount: 4, Gang: true,
				Topology: topology.Constraint{Required: []string{"zone"}, Preferred: []string{"rack"}}}
		}},
		{"basic, partly fits", func(in *snapshot.Input) Unit {
			return Unit{Members: gpuGang(in, "g", 20, "1"), MinCount: 1}
		}},
		{"basic, nothing fits", func(in *snapshot.Input) Unit {
			return Unit{Members: gpuGang(in, "g", 2, "64"), MinCount: 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, twoRacks)
			takeGPUs(&in, "a-0", 2)
			u := tc.unit(&in)

			flat := snapshot.New(in)
			want, err := Place(ctx, flat, dra.New(flat, dra.NewCache()), u)
			if err != nil {
				t.Fatal(err)
			}
			snap := snapshot.New(in)
			root := &TreeNode{Name: "PodGroup ns/g", Leaf: &u}
			got, err := PlaceTree(ctx, snap, dra.New(snap, dra.NewCache()), root)
			if err != nil {
				t.Fatal(err)
			}
			if a := Judge(u, want).Admitted; got.Admitted != a {
				t.Errorf("admitted %t, Place's unit is %t", got.Admitted, a)
			}
			if diff := cmp.Diff(describeResult(want), describeResult(got.Leaves[root])); diff != "" {
				t.Errorf("the leaf's result differs from Place's (-Place,+PlaceTree):\n%s", diff)
			}
			if diff := cmp.Diff(usage(flat), usage(snap)); diff != "" {
				t.Errorf("the snapshot differs afterwards (-Place,+PlaceTree):\n%s", diff)
			}
		})
	}
}

// describeResult is a result as comparable text: each assignment, each
// failure's diagnosis, the domain, how many fit and whether the search ran
// out.
func describeResult(r Result) []string {
	var out []string
	for _, a := range r.Assignments {
		out = append(out, a.Pod.Name+" → "+a.Node)
	}
	for _, f := range r.Unplaced {
		out = append(out, f.Pod.Name+": "+f.Diagnosis.String())
	}
	sort.Strings(out)
	return append(out, "domain "+r.Domain, fmt.Sprintf("placeable %d, exhausted %t", r.Placeable, r.SearchExhausted))
}

// usage is what each node of snap has taken: CPU and free devices.
func usage(snap *snapshot.Snapshot) []string {
	var out []string
	for _, ni := range snap.Nodes {
		out = append(out, fmt.Sprintf("%s cpu=%d free=%d", ni.Node.Name, ni.Requested.MilliCPU, ni.FreeDevices()))
	}
	return out
}
