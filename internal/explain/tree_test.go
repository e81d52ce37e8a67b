package explain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// treeCluster is 2 zones × 2 racks, one node of 5 CPUs per rack, and in ml
// the tree job (gang of 2, in one zone) → head (1 pod of 1 CPU) and
// workers (gang of 2) → w0, w1 (each in one rack, pods of 2 CPUs; w0 has
// 2, w1 w1Pods). extra are more CompositePodGroups.
func treeCluster(t *testing.T, w1Pods int, extra ...*lockv1.CompositePodGroup) (*kubefake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	var kube []runtime.Object
	for i := range 4 {
		kube = append(kube, builders.MakeNode().Name(fmt.Sprintf("n%d", i)).Capacity(corev1.ResourceCPU, "5").Capacity(corev1.ResourceMemory, "16Gi").
			Label(zone, fmt.Sprintf("z%d", i/2)).Label(rack, fmt.Sprintf("r%d", i)).Obj())
	}
	group := func(name, parent string, minCount int32, pods int, cpu string, keys ...string) *lockv1.PodGroup {
		pg := builders.GangPodGroup("ml", name, minCount)
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
		for _, k := range keys {
			pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: k}}}
		}
		for i := range pods {
			kube = append(kube, builders.MakePod().Namespace("ml").Name(fmt.Sprintf("%s-%d", name, i)).Member(name).Req(corev1.ResourceCPU, cpu).Obj())
		}
		return pg
	}
	job := composite("job", "", 2, zone)
	objs := []*lockv1.CompositePodGroup{job, composite("workers", "job", 2)}
	objs = append(objs, extra...)
	var dyn []runtime.Object
	for _, c := range objs {
		u, err := podgroup.CompositeToUnstructured(c)
		if err != nil {
			t.Fatal(err)
		}
		dyn = append(dyn, u)
	}
	for _, pg := range []*lockv1.PodGroup{group("head", "job", 1, 1, "1"), group("w0", "workers", 2, 2, "2", rack), group("w1", "workers", int32(w1Pods), w1Pods, "2", rack)} {
		u, err := podgroup.ToUnstructured(pg)
		if err != nil {
			t.Fatal(err)
		}
		dyn = append(dyn, u)
	}
	return kubefake.NewClientset(kube...), dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		podgroup.Resource: "PodGroupList", podgroup.UpstreamResource: "PodGroupList",
		podgroup.CompositeResource: "CompositePodGroupList", podgroup.UpstreamCompositeResource: "CompositePodGroupList"}, dyn...)
}

func composite(name, parent string, minGroups int32, keys ...string) *lockv1.CompositePodGroup {
	c := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}}
	c.Spec.SchedulingPolicy.Gang = &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: minGroups}
	if parent != "" {
		c.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	for _, k := range keys {
		c.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: k}}}
	}
	return c
}

// TestRunTree: explain draws the tree of the CompositePodGroup asked
// about (its root's, when asked about a child) with each node's verdict in
// the scheduler's decision, and answers with the root's arithmetic when it
// does not fit; a node whose parent is missing is said to wait for it.
func TestRunTree(t *testing.T) {
	for name, tc := range map[string]struct {
		w1Pods     int
		extra      []*lockv1.CompositePodGroup
		ask        string
		wantAnswer []string
		wantAsked  string
		wantLines  []string
		wantLine   string // one of the lines
	}{
		"a tree that fits": {w1Pods: 2, ask: "job",
			wantAnswer: []string{"CompositePodGroup ml/job fits now (5 pods placeable)"},
			wantLines: []string{
				"CompositePodGroup ml/job (gang, minGroupCount 2; topology topology.kubernetes.io/zone): counts: 2 of 2 groups in topology.kubernetes.io/zone=z0",
				"├── CompositePodGroup ml/workers (gang, minGroupCount 2): counts: 2 of 2 groups in topology.kubernetes.io/zone=z0",
				"│   ├── PodGroup ml/w0 (gang, minCount 2; topology example.com/rack; 0 of 2 bound, 2 pending): counts in topology.kubernetes.io/zone=z0, example.com/rack=r0",
				"│   └── PodGroup ml/w1 (gang, minCount 2; topology example.com/rack; 0 of 2 bound, 2 pending): counts in topology.kubernetes.io/zone=z0, example.com/rack=r1",
				"└── PodGroup ml/head (gang, minCount 1; 0 of 1 bound, 1 pending): counts in topology.kubernetes.io/zone=z0",
			}},
		"a worker group that fits in no rack, asked about a child": {w1Pods: 3, ask: "workers", wantAsked: "CompositePodGroup ml/workers",
			wantAnswer: []string{"CompositePodGroup ml/job is pending: CompositePodGroup ml/job: ", "CompositePodGroup ml/workers: 1 of 2 groups fit (minGroupCount 2) in topology.kubernetes.io/zone=z1",
				"PodGroup ml/w1: minCount 3 not satisfiable: at most 2 of 3 pods fit in one topology domain"},
			wantLine: "│   └── PodGroup ml/w1 (gang, minCount 3; topology example.com/rack; 0 of 3 bound, 3 pending): does not count in topology.kubernetes.io/zone=z1, example.com/rack=r2",
		},
		"a missing parent": {w1Pods: 2, extra: []*lockv1.CompositePodGroup{composite("orphan", "gone", 1)}, ask: "orphan",
			wantAnswer: []string{"CompositePodGroup ml/orphan is not scheduled: waiting for CompositePodGroup gone, its parent, which does not exist"}},
	} {
		t.Run(name, func(t *testing.T) {
			kube, dyn := treeCluster(t, tc.w1Pods, tc.extra...)
			r, err := RunTree(context.Background(), kube, dyn, "ml", tc.ask)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.wantAnswer {
				if !strings.Contains(r.Answer, want) {
					t.Errorf("answer %q lacks %q", r.Answer, want)
				}
			}
			if r.Asked != tc.wantAsked {
				t.Errorf("asked: want %q, got %q", tc.wantAsked, r.Asked)
			}
			if tc.wantLines != nil {
				if diff := cmp.Diff(tc.wantLines, r.Root.Lines()); diff != "" {
					t.Errorf("tree (-want,+got):\n%s", diff)
				}
			}
			if tc.wantLine != "" && (r.Root == nil || !strings.Contains(strings.Join(r.Root.Lines(), "\n"), tc.wantLine)) {
				t.Errorf("the tree lacks %q", tc.wantLine)
			}
			if r.Root != nil {
				t.Logf("%s\n%s", r.Answer, strings.Join(r.Root.Lines(), "\n"))
			}
		})
	}
}

// TestExplainGroupAgreesWithItsTree: the scheduler never decides a tree's
// group alone, and neither does explain. Two rack-bound worker groups under
// a zone-bound root, with one free rack per zone: each group would fit
// alone (a free rack), the tree fits nowhere (no zone has two). Explaining
// a worker group, its pod or the root gives the tree's answer — pending,
// with the root's arithmetic — never "fits now".
func TestExplainGroupAgreesWithItsTree(t *testing.T) {
	kube, dyn := treeCluster(t, 2)
	for _, node := range []string{"n1", "n3"} { // one rack of each zone taken
		p := builders.MakePod().Namespace("other").Name("busy-"+node).Node(node).Req(corev1.ResourceCPU, "4").Obj()
		p.UID, p.Status.Phase = types.UID("busy-"+node), corev1.PodRunning
		if err := kube.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := RunTree(context.Background(), kube, dyn, "ml", "job")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tree.Answer, "CompositePodGroup ml/job is pending") {
		t.Fatalf("the tree: answer %q, want it pending (no zone has two free racks)", tree.Answer)
	}
	for _, target := range []Target{{Kind: "podgroup", Namespace: "ml", Name: "w0"}, {Kind: "pod", Namespace: "ml", Name: "w1-0"}, {Kind: "podgroup", Namespace: "ml", Name: "head"}} {
		r, err := Run(context.Background(), kube, dyn, target)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(r.Answer, "fits now") || !strings.Contains(r.Answer, tree.Answer) || r.Tree != "CompositePodGroup ml/job" {
			t.Errorf("%s %s: answer %q (tree %q), want the tree's answer %q", target.Kind, target.Name, r.Answer, r.Tree, tree.Answer)
		}
	}
}
