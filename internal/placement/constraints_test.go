package placement_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/kubefilter"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// Four 8-CPU nodes, two per zone.
const zones = `
nodePools:
- name: worker
  count: 4
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels:
    topology.kubernetes.io/zone: "zone-{{div .Index 2}}"
`

func filters(t *testing.T, ctx context.Context) *kubefilter.Filters {
	t.Helper()
	client := fake.NewClientset()
	f := informers.NewSharedInformerFactory(client, 0)
	fl, err := kubefilter.New(ctx, f, client)
	if err != nil {
		t.Fatal(err)
	}
	// Namespaces for namespaceSelector terms come from the informer's
	// store; nothing else is read.
	if err := f.Core().V1().Namespaces().Informer().GetIndexer().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}}); err != nil {
		t.Fatal(err)
	}
	return fl
}

func member(name string, cpu string, mutate func(*corev1.Pod)) placement.Member {
	p := builders.MakePod().Namespace("ns").Name(name).Label("app", "train").Req(corev1.ResourceCPU, cpu).Obj()
	p.UID = types.UID(name)
	if mutate != nil {
		mutate(p)
	}
	return placement.Member{Pod: p}
}

func members(prefix string, n int, cpu string, mutate func(*corev1.Pod)) []placement.Member {
	var out []placement.Member
	for i := 0; i < n; i++ {
		out = append(out, member(fmt.Sprintf("%s-%d", prefix, i), cpu, mutate))
	}
	return out
}

var trainSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}}

func antiAffine(key string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: trainSelector, TopologyKey: key}},
		}}
	}
}

func affine(key string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: trainSelector, TopologyKey: key}},
		}}
	}
}

func spread(key string, maxSkew int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: trainSelector,
		}}
	}
}

func bound(name, node string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := member(name, "1", mutate).Pod
	p.Spec.NodeName = node
	return p
}

// Members placed earlier in a cycle count as existing pods for the
// members after them, with kube-scheduler's own semantics.
func TestPodConstraintsInsideAGang(t *testing.T) {
	const host, zone = corev1.LabelHostname, corev1.LabelTopologyZone
	tests := map[string]struct {
		existing []*corev1.Pod
		members  []placement.Member
		minCount int
		// wantPerNode, if set, is how many members each used node gets;
		// wantPerZone likewise per zone. wantPlaced 0: the gang fails.
		wantPlaced  int
		wantPerNode int
		wantPerZone map[string]int
		wantReason  string
		notOn       string
	}{
		"anti-affinity on hostname spreads a gang one per node": {
			members: members("a", 4, "1", antiAffine(host)), minCount: 4, wantPlaced: 4, wantPerNode: 1,
		},
		"anti-affinity on hostname: a fifth member has no node, the gang waits": {
			members: members("a", 5, "1", antiAffine(host)), minCount: 5,
			wantReason: "node(s) didn't match pod anti-affinity rules",
		},
		"anti-affinity on zone: two members, one per zone": {
			members: members("a", 2, "1", antiAffine(zone)), minCount: 2, wantPlaced: 2,
			wantPerZone: map[string]int{"zone-0": 1, "zone-1": 1},
		},
		"an existing pod's anti-affinity keeps the gang off its node": {
			existing: []*corev1.Pod{bound("guard", "worker-0", antiAffine(host))},
			members:  members("a", 3, "1", nil), minCount: 3, wantPlaced: 3,
			notOn: "worker-0",
		},
		"required affinity to a running pod follows it into its zone": {
			existing: []*corev1.Pod{bound("leader", "worker-3", nil)},
			members:  members("a", 4, "3", affine(zone)), minCount: 4, wantPlaced: 4,
			wantPerZone: map[string]int{"zone-1": 4},
		},
		"required affinity to the gang itself: the first member lands anywhere, the rest follow": {
			members: members("a", 4, "1", affine(zone)), minCount: 4, wantPlaced: 4,
			wantPerZone: map[string]int{"zone-0": 4},
		},
		"zone spread with maxSkew 1 counts the gang's own members": {
			members: members("a", 6, "1", spread(zone, 1)), minCount: 6, wantPlaced: 6,
			wantPerZone: map[string]int{"zone-0": 3, "zone-1": 3},
		},
		"zone spread counts running pods too": {
			existing: []*corev1.Pod{bound("old-0", "worker-0", nil), bound("old-1", "worker-1", nil)},
			members:  members("a", 2, "1", spread(zone, 1)), minCount: 2, wantPlaced: 2,
			wantPerZone: map[string]int{"zone-1": 2},
		},
		"zone spread that cannot hold: 8 CPUs left in one zone": {
			existing: []*corev1.Pod{bound("hog-0", "worker-0", func(p *corev1.Pod) {
				p.Labels = nil
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = builders.Quantity("8")
			}),
				bound("hog-1", "worker-1", func(p *corev1.Pod) {
					p.Labels = nil
					p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = builders.Quantity("8")
				})},
			members: members("a", 4, "2", spread(zone, 1)), minCount: 4,
			wantReason: "node(s) didn't match pod topology spread constraints",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := builders.SnapshotInput(t, zones)
			in.Pods = tc.existing
			snap := snapshot.New(in)
			snap.Constraints = filters(t, ctx).NewView(in.Nodes, in.Pods)
			res, err := placement.Place(ctx, snap, dra.New(snap, dra.NewCache()), placement.Unit{Members: tc.members, MinCount: tc.minCount, Gang: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Assignments) != tc.wantPlaced {
				t.Fatalf("want %d placed, got %d (unplaced: %v)", tc.wantPlaced, len(res.Assignments), failures(res))
			}
			perNode, perZone := map[string]int{}, map[string]int{}
			zoneOf := map[string]string{}
			for _, n := range in.Nodes {
				zoneOf[n.Name] = n.Labels[zone]
			}
			for _, a := range res.Assignments {
				perNode[a.Node]++
				perZone[zoneOf[a.Node]]++
			}
			if tc.notOn != "" && perNode[tc.notOn] > 0 {
				t.Errorf("%d members on %s: %v", perNode[tc.notOn], tc.notOn, perNode)
			}
			for n, c := range perNode {
				if tc.wantPerNode > 0 && c != tc.wantPerNode {
					t.Errorf("node %s has %d members, want %d", n, c, tc.wantPerNode)
				}
			}
			if tc.wantPerZone != nil && fmt.Sprint(perZone) != fmt.Sprint(tc.wantPerZone) {
				t.Errorf("per zone: got %v, want %v", perZone, tc.wantPerZone)
			}
			if tc.wantReason != "" {
				found := false
				for _, f := range res.Unplaced {
					found = found || f.Diagnosis.Reasons[tc.wantReason] > 0
				}
				if !found {
					t.Errorf("want reason %q among %v", tc.wantReason, failures(res))
				}
			}
		})
	}
}

// A lone pod with required anti-affinity against running pods is filtered
// as kube-scheduler filters it; rolling back a failed gang leaves no trace
// of its members in the constraints.
func TestPodConstraintsRollBack(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := builders.SnapshotInput(t, zones)
	snap := snapshot.New(in)
	snap.Constraints = filters(t, ctx).NewView(in.Nodes, nil)
	alloc := dra.New(snap, dra.NewCache())
	// Five anti-affine members on four nodes: fails and is rolled back.
	res, err := placement.Place(ctx, snap, alloc, placement.Unit{Members: members("a", 5, "1", antiAffine(corev1.LabelHostname)), MinCount: 5, Gang: true})
	if err != nil || len(res.Assignments) != 0 {
		t.Fatalf("want the gang rolled back, got %d placed (%v)", len(res.Assignments), err)
	}
	// Nothing of it remains: four anti-affine pods fit again, one per node.
	res, err = placement.Place(ctx, snap, alloc, placement.Unit{Members: members("b", 4, "1", antiAffine(corev1.LabelHostname)), MinCount: 4, Gang: true})
	if err != nil || len(res.Assignments) != 4 {
		t.Fatalf("after rollback: want 4 placed, got %d (%v, %v)", len(res.Assignments), err, failures(res))
	}
	// A lone pod matching their selector now finds no node.
	res, err = placement.Place(ctx, snap, alloc, placement.Unit{Members: []placement.Member{member("c", "1", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Assignments) != 0 || res.Unplaced[0].Diagnosis.Reasons["node(s) didn't satisfy existing pods anti-affinity rules"] != 4 {
		t.Errorf("lone pod: want it refused by 4 nodes' existing anti-affinity, got %d placed, %v", len(res.Assignments), failures(res))
	}
}

func failures(res placement.Result) []string {
	var out []string
	for _, f := range res.Unplaced {
		out = append(out, f.Pod.Name+": "+f.Diagnosis.String())
	}
	return out
}
