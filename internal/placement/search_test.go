package placement

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// The gang of the issue: 4 CPU-heavy ranks (1 GPU, 8 CPU) and 4 light
// ones (1 GPU, 2 CPU) on 2 nodes × 4 GPUs × 24 CPUs. Filling one node
// before the next strands GPUs behind spent CPU; 2 + 2 per node fits, and
// kube-scheduler finds it pod by pod. The search finds it.
func TestHeterogeneousGangThatFitsIsPlaced(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, `
nodePools:
- name: node
  count: 2
  capacity: {cpu: "24", memory: 96Gi, pods: "110"}
  devices: [{driver: gpu.example.com, count: 4}]
`)
	members := append(gpuGang(&in, "heavy", 4, "8"), gpuGang(&in, "light", 4, "2")...)
	snap := snapshot.New(in)
	res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: members, MinCount: 8, Gang: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Assignments) != 8 {
		t.Fatalf("placed %d of 8: %v", len(res.Assignments), res.Unplaced[0].Diagnosis)
	}
	heavy := map[string]int{}
	for _, a := range res.Assignments {
		if a.Pod.Name[0] == 'h' {
			heavy[a.Node]++
		}
	}
	if heavy["node-0"] != 2 || heavy["node-1"] != 2 {
		t.Errorf("heavy ranks per node %v, want 2 and 2", heavy)
	}
}

// caseSpec is one generated case: nodes with CPU, memory, GPUs and a rack,
// and a gang of up to 3 shapes.
type caseSpec struct {
	nodes    []nodeSpec
	shapes   []shape
	minCount int
	rack     bool // required topology: one rack
}

type nodeSpec struct {
	cpu, mem, gpus int
	rack           string
}

type shape struct{ count, cpu, mem, gpus int }

func (c caseSpec) members() int {
	n := 0
	for _, s := range c.shapes {
		n += s.count
	}
	return n
}

// generate draws a small case: 1–4 nodes, 1–3 shapes of 1–3 members.
func generate(rng *rand.Rand) caseSpec {
	var c caseSpec
	for i, n := 0, 1+rng.Intn(4); i < n; i++ {
		c.nodes = append(c.nodes, nodeSpec{cpu: 2 + rng.Intn(9), mem: 2 + rng.Intn(9), gpus: rng.Intn(5), rack: fmt.Sprint("r", rng.Intn(2))})
	}
	for i, n := 0, 1+rng.Intn(3); i < n; i++ {
		c.shapes = append(c.shapes, shape{count: 1 + rng.Intn(3), cpu: 1 + rng.Intn(5), mem: rng.Intn(5), gpus: rng.Intn(3)})
	}
	c.minCount = 1 + rng.Intn(c.members())
	c.rack = rng.Intn(3) == 0
	return c
}

// bruteForce reports whether minCount members fit: every assignment of
// each member to a node or to nothing, checked with plain arithmetic.
func bruteForce(c caseSpec) bool {
	var ms []shape
	for _, s := range c.shapes {
		for i := 0; i < s.count; i++ {
			ms = append(ms, s)
		}
	}
	assign := make([]int, len(ms)) // -1: not placed
	var try func(i int) bool
	try = func(i int) bool {
		if i == len(ms) {
			return feasible(c, ms, assign)
		}
		for n := -1; n < len(c.nodes); n++ {
			assign[i] = n
			if try(i + 1) {
				return true
			}
		}
		return false
	}
	return try(0)
}

func feasible(c caseSpec, ms []shape, assign []int) bool {
	used := make([]nodeSpec, len(c.nodes))
	placed, rack := 0, ""
	for i, n := range assign {
		if n < 0 {
			continue
		}
		placed++
		if c.rack {
			if rack != "" && rack != c.nodes[n].rack {
				return false
			}
			rack = c.nodes[n].rack
		}
		used[n].cpu += ms[i].cpu
		used[n].mem += ms[i].mem
		used[n].gpus += ms[i].gpus
	}
	for n, u := range used {
		if u.cpu > c.nodes[n].cpu || u.mem > c.nodes[n].mem || u.gpus > c.nodes[n].gpus {
			return false
		}
	}
	return placed >= c.minCount
}

// build renders a case into a snapshot and a unit (GPUs as one DRA claim
// per member asking for its count).
func build(c caseSpec) (*snapshot.Snapshot, Unit) {
	in := snapshot.Input{Features: features.Default()}
	for i, n := range c.nodes {
		name := fmt.Sprint("n", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": n.rack}}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: builders.Quantity(fmt.Sprint(n.cpu)), corev1.ResourceMemory: builders.Quantity(fmt.Sprint(n.mem, "Gi")), corev1.ResourcePods: builders.Quantity("110"),
		}}}
		in.Nodes = append(in.Nodes, node)
		if n.gpus > 0 {
			sl := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu"}, Spec: resourcev1.ResourceSliceSpec{
				Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: name, ResourceSliceCount: 1}, NodeName: &node.Name}}
			for d := 0; d < n.gpus; d++ {
				sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{Name: fmt.Sprint("gpu-", d)})
			}
			in.Slices = append(in.Slices, sl)
		}
	}
	in.Classes = append(in.Classes, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}}})
	unit := Unit{MinCount: c.minCount, Gang: true}
	if c.rack {
		unit.Topology = topology.Constraint{Required: []string{"rack"}}
	}
	for si, s := range c.shapes {
		for i := 0; i < s.count; i++ {
			name := fmt.Sprintf("s%d-%d", si, i)
			b := builders.MakePod().Namespace("ns").Name(name).Req(corev1.ResourceCPU, fmt.Sprint(s.cpu)).Req(corev1.ResourceMemory, fmt.Sprint(s.mem, "Gi"))
			m := Member{}
			if s.gpus > 0 {
				b = b.ClaimTemplate("gpu", "gpus")
			}
			m.Pod = b.Obj()
			m.Pod.UID = types.UID(name)
			if s.gpus > 0 {
				claim := builders.Claim("ns", name+"-gpu", "gpu.example.com", int64(s.gpus))
				claim.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: name, UID: m.Pod.UID}}
				in.Claims = append(in.Claims, claim)
				m.Claims = []types.NamespacedName{{Namespace: "ns", Name: claim.Name}}
			}
			unit.Members = append(unit.Members, m)
		}
	}
	return snapshot.New(in), unit
}

// TestSearchFindsWhatBruteForceFinds: on 2,500 generated small cases
// (CPU, memory and DRA GPUs; a rack constraint on a third of them), the
// gang is admitted exactly when some assignment of its members to nodes
// places minCount of them — placement finds every placement brute force
// finds, and claims none that does not exist.
func TestSearchFindsWhatBruteForceFinds(t *testing.T) {
	ctx := klog.NewContext(t.Context(), klog.Background().V(0))
	rng := rand.New(rand.NewSource(24))
	fits, greedyMissed := 0, 0
	for i := 0; i < 2500; i++ {
		c := generate(rng)
		want := bruteForce(c)
		snap, unit := build(c)
		res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), unit)
		if err != nil {
			t.Fatalf("case %d %+v: %v", i, c, err)
		}
		got := Judge(unit, res).Admitted
		if got != want {
			t.Errorf("case %d %+v: admitted %t, brute force %t (exhausted %t)", i, c, got, want, res.SearchExhausted)
		}
		if want {
			fits++
		}
		if res.SearchExhausted {
			t.Errorf("case %d: a small case exhausted the search budget", i)
		}
		if want && !c.rack && !greedyAlone(ctx, c) {
			greedyMissed++
		}
	}
	t.Logf("%d of 2500 cases fit; the greedy orders alone missed %d of those without topology", fits, greedyMissed)
	if greedyMissed == 0 {
		t.Errorf("no generated case needed the search: the test does not exercise it")
	}
}

// greedyAlone is what the greedy orders alone give (no search).
func greedyAlone(ctx context.Context, c caseSpec) bool {
	snap, unit := build(c)
	groups, err := buildGroups(ctx, snap, unit, scope{nodes: snap.Nodes})
	if err != nil {
		return false
	}
	for i, order := range orders(groups) {
		if i == maxOrders {
			break
		}
		a := newAttempt(ctx, snap, dra.New(snap, dra.NewCache()), unit, false, nil)
		if res, err := a.run(order); err == nil && len(res.Assignments) > 0 {
			return true
		}
		for _, g := range groups {
			g.reset()
		}
	}
	return false
}

// A gang whose search runs out of budget says so — "one may exist" —
// instead of "does not fit" (the heterogeneous gang with a budget
// of 3 node tries).
func TestSearchBudgetIsReported(t *testing.T) {
	ctx := klog.NewContext(t.Context(), klog.Background().V(0))
	c := caseSpec{minCount: 8, nodes: []nodeSpec{{cpu: 24, mem: 96, gpus: 4}, {cpu: 24, mem: 96, gpus: 4}},
		shapes: []shape{{count: 4, cpu: 8, mem: 1, gpus: 1}, {count: 4, cpu: 2, mem: 1, gpus: 1}}}
	snap, unit := build(c)
	unit.SearchBudget = 3
	res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), unit)
	if err != nil {
		t.Fatal(err)
	}
	o := Judge(unit, res)
	if o.Admitted || !res.SearchExhausted {
		t.Fatalf("admitted %t, exhausted %t; want a search that ran out", o.Admitted, res.SearchExhausted)
	}
	if got := Summary(ctx, snap, dra.NewCache(), o); !strings.HasPrefix(got, "minCount 8: no placement found within the search budget; one may exist") {
		t.Errorf("summary %q", got)
	}
	unit.SearchBudget = 0
	if res, _ := Place(ctx, snap, dra.New(snap, dra.NewCache()), unit); !Judge(unit, res).Admitted {
		t.Errorf("with the default budget the gang is not placed")
	}
}
