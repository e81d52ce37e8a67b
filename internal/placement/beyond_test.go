package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// reqPods are n pods asking cpu and example.com/gpu each (none when "").
func reqPods(n int, cpu, gpu string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		b := builders.MakePod().Namespace("ns").Name(fmt.Sprintf("p-%s-%s-%d", cpu, gpu, i))
		if cpu != "" {
			b = b.Req(corev1.ResourceCPU, cpu)
		}
		if gpu != "" {
			b = b.Req("example.com/gpu", gpu)
		}
		out = append(out, b.Obj())
	}
	return out
}

// plainNodes are 2 nodes × 8 CPUs with no extended resource.
const plainNodes = `
nodePools:
- name: plain
  count: 2
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
`

// A unit is beyond capacity only when the nodes could not hold it even
// empty: what runs on them does not count, nor does an extended resource
// DRA serves; the members it needs are counted, not all of them.
func TestBeyondCapacity(t *testing.T) {
	// mixedGPUs: 2 nodes × 8 CPUs, 110 pods; example.com/gpu 2 on one of
	// them from a device plugin, 4 devices on the other.
	gang := func(minCount, bound int, pending ...[]*corev1.Pod) *podgroup.Unit {
		u := &podgroup.Unit{Group: builders.GangPodGroup("ns", "g", int32(minCount)), Bound: bound}
		for _, p := range pending {
			u.Pending = append(u.Pending, p...)
		}
		return u
	}
	lone := func(p []*corev1.Pod) *podgroup.Unit { return &podgroup.Unit{Pending: p} }
	for _, tc := range []struct {
		name    string
		unit    *podgroup.Unit
		class   bool   // a DeviceClass serves example.com/gpu
		running int    // 1-CPU pods running on the nodes
		spec    string // the cluster; mixedGPUs when empty
		want    string
	}{
		{name: "a gang that fits", unit: gang(16, 0, reqPods(16, "1", "")), want: ""},
		{name: "a gang that fits nodes full of others", unit: gang(16, 0, reqPods(16, "1", "")), running: 16, want: ""},
		{name: "more CPU than the nodes have", unit: gang(20, 0, reqPods(20, "1", "")),
			want: "beyond what the nodes hold even empty: 20 pods needed at once ask at least 20 cpu, the 2 nodes have 16 in all"},
		{name: "minCount counts, not every member", unit: gang(10, 0, reqPods(20, "1", "")), want: ""},
		{name: "bound members need no more", unit: gang(20, 10, reqPods(10, "1", "")), want: ""},
		{name: "more pods than the nodes allow", unit: gang(300, 0, reqPods(300, "", "")),
			want: "beyond what the nodes hold even empty: 300 pods needed at once, the 2 nodes allow 220 in all"},
		{name: "a lone pod larger than any node", unit: lone(reqPods(1, "9", "")),
			want: "beyond what the nodes hold even empty: 0 of its pending pods fit any of the 2 nodes' allocatable, 1 needed at once"},
		{name: "a lone pod as large as a node", unit: lone(reqPods(1, "8", "")), want: ""},
		{name: "the smallest members count", unit: gang(2, 0, reqPods(2, "9", ""), reqPods(2, "1", "")), want: ""},
		{name: "too few members fit a node", unit: gang(3, 0, reqPods(2, "9", ""), reqPods(2, "1", "")),
			want: "beyond what the nodes hold even empty: 2 of its pending pods fit any of the 2 nodes' allocatable, 3 needed at once"},
		{name: "a device plugin's extended resource", unit: gang(3, 0, reqPods(3, "1", "1")),
			want: "beyond what the nodes hold even empty: 3 pods needed at once ask at least 3 example.com/gpu, the 2 nodes have 2 in all"},
		{name: "an extended resource DRA serves is left out", unit: gang(3, 0, reqPods(3, "1", "1")), class: true, want: ""},
		{name: "an extended resource no node has", unit: lone(reqPods(1, "", "1")), spec: plainNodes,
			want: "beyond what the nodes hold even empty: 0 of its pending pods fit any of the 2 nodes' allocatable, 1 needed at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			if spec == "" {
				spec = mixedGPUs
			}
			in := cluster(t, spec)
			if tc.class {
				in = withGPUClass(in)
			}
			for i, p := range reqPods(tc.running, "1", "") {
				p.Spec.NodeName = in.Nodes[i%len(in.Nodes)].Name
				in.Pods = append(in.Pods, p)
			}
			if got := BeyondCapacity(snapshot.New(in), tc.unit); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// MoreNodes bounds the nodes of one kind a unit needs beyond those there
// are, from its Demand.
func TestDemandMoreNodes(t *testing.T) {
	gang := func(minCount int, pending []*corev1.Pod) *podgroup.Unit {
		return &podgroup.Unit{Group: builders.GangPodGroup("ns", "g", int32(minCount)), Pending: pending}
	}
	node := func(cpu, gpus int64) snapshot.Resources {
		r := snapshot.Resources{MilliCPU: cpu * 1000, Memory: 32 << 30, Pods: 110}
		if gpus > 0 {
			r.Scalar = map[corev1.ResourceName]int64{"example.com/gpu": gpus}
		}
		return r
	}
	// mixedGPUs: 16 CPUs, 220 pods and 2 example.com/gpu in all.
	for _, tc := range []struct {
		name   string
		unit   *podgroup.Unit
		node   snapshot.Resources
		want   int
		wantOK bool
	}{
		{name: "it fits already: one node is the least", unit: gang(16, reqPods(16, "1", "")), node: node(8, 0), want: 1, wantOK: true},
		{name: "24 CPUs short on 8-CPU nodes", unit: gang(40, reqPods(40, "1", "")), node: node(8, 0), want: 3, wantOK: true},
		{name: "one large node covers 24 CPUs", unit: gang(40, reqPods(40, "1", "")), node: node(64, 0), want: 1, wantOK: true},
		{name: "80 pod slots short on 110-pod nodes", unit: gang(300, reqPods(300, "", "")), node: node(8, 0), want: 1, wantOK: true},
		{name: "a node without the missing resource never helps", unit: gang(3, reqPods(3, "1", "1")), node: node(8, 0)},
		{name: "a node with it does", unit: gang(3, reqPods(3, "1", "1")), node: node(8, 2), want: 1, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New(cluster(t, mixedGPUs))
			d, ok := DemandOf(snap, tc.unit)
			if !ok {
				t.Fatal("no demand")
			}
			n, ok := d.MoreNodes(TotalAllocatable(snap), tc.node)
			if n != tc.want || ok != tc.wantOK {
				t.Errorf("MoreNodes = %d, %v; want %d, %v", n, ok, tc.want, tc.wantOK)
			}
		})
	}
}
