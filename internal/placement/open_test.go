package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// cliqueAndCPU is one zone of CPU nodes (cpu-0, cpu-1: no devices), GPU
// nodes whose GPUs carry a clique attribute (gpu-0..3: clique 0 on even,
// 1 on odd nodes, 2 GPUs each), and GPU nodes whose GPUs carry none
// (plain-0, plain-1).
const cliqueAndCPU = `
nodePools:
- name: cpu
  count: 2
  capacity: {cpu: "32", memory: 64Gi, pods: "110"}
  labels: {pool: cpu, zone: z0, rack: rc}
- name: gpu
  count: 4
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {pool: gpu, zone: z0, rack: "r{{.Index}}"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes:
      clique: {int: "{{mod .NodeIndex 2}}"}
- name: plain
  count: 2
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {pool: gpu, zone: z0, rack: "rp{{.Index}}"}
  devices: [{driver: gpu.example.com, count: 2}]
`

const clique = "gpu.example.com/clique"

// launcher is a CPU-only coordinator that must run on the CPU pool (an
// MPI launcher, a Ray head).
func launcher(name, cpu string) Member {
	m := cpuPods(name, 1, cpu)[0]
	m.Pod.Spec.NodeSelector = map[string]string{"pool": "cpu"}
	return m
}

// A device attribute constrains the devices members hold, not members that
// hold none: a CPU launcher pinned to CPU nodes (whose slices carry no
// device with the attribute) is placed beside ranks that all share one
// clique; ranks never take GPUs without the attribute, and when the
// cliques cannot hold them the diagnosis says those nodes have none.
func TestDeviceTopologyLeavesMembersWithoutDevicesFree(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ranks     int
		required  []string
		busy      map[string]int
		wantAdmit bool
		// wantCliques are the clique values the ranks' GPUs may share.
		wantCliques []string
		// wantNoDevice: nodes an unplaced rank's diagnosis counts as
		// having no device with the attribute.
		wantNoDevice int
	}{
		{name: "launcher on a CPU node, 4 ranks in one clique", ranks: 4, wantAdmit: true, wantCliques: []string{"0", "1"}},
		{name: "required zone: the CPU nodes share it", ranks: 4, required: []string{"zone"}, wantAdmit: true, wantCliques: []string{"0", "1"}},
		{name: "clique 0 is short: the gang goes to clique 1", ranks: 4, busy: map[string]int{"gpu-0": 1}, wantAdmit: true, wantCliques: []string{"1"}},
		{name: "no clique holds 6 ranks: GPUs without the attribute are not used", ranks: 6,
			wantNoDevice: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, cliqueAndCPU)
			for node, n := range tc.busy {
				takeGPUs(&in, node, n)
			}
			members := append([]Member{launcher("launcher", "4")}, gpuGang(&in, "rank", tc.ranks, "1")...)
			snap := snapshot.New(in)
			unit := Unit{Members: members, MinCount: len(members), Gang: true, Topology: topology.Constraint{Required: tc.required, DeviceAttribute: clique}}
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), unit)
			if err != nil {
				t.Fatal(err)
			}
			if got := Judge(unit, res).Admitted; got != tc.wantAdmit {
				t.Fatalf("admitted %v, want %v (%d placed, domain %q, unplaced %v)", got, tc.wantAdmit, len(res.Assignments), res.Domain, res.Unplaced)
			}
			if !tc.wantAdmit {
				for _, f := range res.Unplaced {
					if strings.HasPrefix(f.Pod.Name, "rank-") {
						if n := f.Diagnosis.Reasons[topology.NoDevice(clique)]; n != tc.wantNoDevice {
							t.Errorf("%s: %d nodes without the attribute in its reasons %v, want %d (CPU and plain GPU nodes)", f.Pod.Name, n, f.Diagnosis.Reasons, tc.wantNoDevice)
						}
						return
					}
				}
				t.Fatalf("no rank among the unplaced %v", res.Unplaced)
			}
			cliques := map[string]bool{}
			for _, a := range res.Assignments {
				pool := snap.Node(a.Node).Node.Labels["pool"]
				if a.Pod.Name == "launcher-0" {
					if pool != "cpu" {
						t.Errorf("launcher on %s (pool %s), want a CPU node", a.Node, pool)
					}
					continue
				}
				if !strings.HasPrefix(a.Node, "gpu-") {
					t.Errorf("%s on %s, a node whose GPUs carry no clique", a.Pod.Name, a.Node)
				}
				cliques[parity(a.Node)] = true
			}
			if len(cliques) != 1 {
				t.Fatalf("ranks span cliques %v, want one", cliques)
			}
			for c := range cliques {
				if !contains(tc.wantCliques, c) {
					t.Errorf("ranks in clique %s, want one of %v", c, tc.wantCliques)
				}
			}
		})
	}
}

// A tree whose children inherit the root's device attribute (an MPIJob's
// launcher and workers, a RayCluster's head and worker groups): the CPU
// child is placed on the CPU nodes — in a required rack of its own — and
// the GPU child in one clique.
func TestTreeDeviceTopologyPlacesTheCPUChild(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, cliqueAndCPU)
	workers := gpuGang(&in, "worker", 4, "1")
	snap := snapshot.New(in)
	c := topology.Constraint{DeviceAttribute: clique}
	head := leaf("head", []Member{launcher("head", "4")}, 1, topology.Constraint{Required: []string{"rack"}, DeviceAttribute: clique})
	work := leaf("workers", workers, 4, c)
	root := &TreeNode{Name: "CompositePodGroup ns/job", Gang: true, MinGroupCount: 2, Topology: c, Children: []*TreeNode{head, work}}
	res, err := PlaceTree(ctx, snap, dra.New(snap, dra.NewCache()), root)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Admitted {
		t.Fatalf("tree not admitted: %v", res.Verdicts)
	}
	if a := res.Leaves[head].Assignments; len(a) != 1 || !strings.HasPrefix(a[0].Node, "cpu-") {
		t.Errorf("head placed %v, want one CPU node", a)
	}
	cliques := map[string]bool{}
	for _, a := range res.Leaves[work].Assignments {
		if !strings.HasPrefix(a.Node, "gpu-") {
			t.Errorf("%s on %s, a node whose GPUs carry no clique", a.Pod.Name, a.Node)
		}
		cliques[parity(a.Node)] = true
	}
	if len(cliques) != 1 {
		t.Errorf("workers span cliques %v, want one", cliques)
	}
}

// A member that holds a device through an extended resource (a device
// plugin's) is not free of the attribute: it is not placed on the open
// nodes.
func TestDeviceTopologyExtendedResourceHoldsADevice(t *testing.T) {
	g := &group{req: snapshot.Resources{Scalar: map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}}}
	if !g.holdsDevice() {
		t.Error("a member requesting nvidia.com/gpu holds no device")
	}
	g = &group{req: snapshot.Resources{Scalar: map[corev1.ResourceName]int64{"hugepages-2Mi": 1 << 21}}}
	if g.holdsDevice() {
		t.Error("a member requesting hugepages holds a device")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
