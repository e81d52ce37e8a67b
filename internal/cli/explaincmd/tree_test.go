package explaincmd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// explain compositepodgroup NAME (any of its type names) explains the
// tree: the answer first, then the root's condition and the tree drawn
// with each node's verdict; -o json is the same report as data.
func TestRunTree(t *testing.T) {
	root := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "job"}}
	root.Spec.SchedulingPolicy.Gang = &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 1}
	root.Status.Conditions = []metav1.Condition{{Type: lockv1.CompositePodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: "WaitingForPods", Message: "no pods yet"}}
	ru, err := podgroup.CompositeToUnstructured(root)
	if err != nil {
		t.Fatal(err)
	}
	pg := builders.GangPodGroup("ml", "w0", 2)
	pg.Spec.ParentCompositePodGroupName = ptr.To("job")
	gu, err := podgroup.ToUnstructured(pg)
	if err != nil {
		t.Fatal(err)
	}
	c := &clientopts.Clients{
		Kube: kubefake.NewClientset(builders.MakePod().Namespace("ml").Name("w0-0").Member("w0").Obj()),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			podgroup.Resource: "PodGroupList", podgroup.UpstreamResource: "PodGroupList",
			podgroup.CompositeResource: "CompositePodGroupList", podgroup.UpstreamCompositeResource: "CompositePodGroupList"}, ru, gu),
	}
	const answer = "CompositePodGroup ml/job is waiting: waiting for the tree's groups: PodGroup ml/w0: waiting for pods: fewer than minCount 2 members exist; none is placed until 2 do"
	for _, kind := range []string{"compositepodgroup", "cpg", "compositepodgroups.scheduling.lockstep.dev"} {
		t.Run(kind, func(t *testing.T) {
			o := NewOptions()
			o.Kind, o.Name, o.Client.Namespace, o.Clients = kind, "job", "ml", c
			var out bytes.Buffer
			if err := o.Run(context.Background(), &out); err != nil {
				t.Fatal(err)
			}
			want := []string{answer, "",
				"1. Condition CompositePodGroupInitiallyScheduled=False (WaitingForPods): no pods yet",
				"2. The tree, each node with its verdict in the scheduler's decision:",
				"   CompositePodGroup ml/job (gang, minGroupCount 1): not attempted: the tree waits",
				"   └── PodGroup ml/w0 (gang, minCount 2; 0 of 1 bound, 1 pending): not attempted: the tree waits"}
			if diff := cmp.Diff(want, strings.Split(strings.TrimRight(out.String(), "\n"), "\n")); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
	t.Run("-o json", func(t *testing.T) {
		o := NewOptions()
		o.Kind, o.Name, o.Client.Namespace, o.Clients, o.Output.Format = "cpg", "job", "ml", c, "json"
		var out bytes.Buffer
		if err := o.Run(context.Background(), &out); err != nil {
			t.Fatal(err)
		}
		var r explain.TreeReport
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Answer != answer || r.Tree != "CompositePodGroup ml/job" {
			t.Errorf("want the tree's answer, got %+v", r)
		}
	})
}

// printTree draws the tree under its answer, the asked node named when it
// is not the root.
func TestPrintTree(t *testing.T) {
	r := &explain.TreeReport{Answer: "CompositePodGroup ml/job is pending: …", Tree: "CompositePodGroup ml/job", Asked: "CompositePodGroup ml/workers",
		Root: &explain.TreeNodeReport{Name: "CompositePodGroup ml/job", Policy: "gang, minGroupCount 2", Verdict: "does not count: 1 of 2 groups in zone=z1",
			Children: []*explain.TreeNodeReport{
				{Name: "PodGroup ml/head", Policy: "gang, minCount 1", Members: 1, Pending: 1, Verdict: "counts in zone=z1"},
				{Name: "CompositePodGroup ml/workers", Policy: "basic", Verdict: "not reached", Children: []*explain.TreeNodeReport{
					{Name: "PodGroup ml/w0", Policy: "gang, minCount 8", Topology: []string{"rack"}, Members: 8, Pending: 8, Verdict: "not reached"}}},
			}},
		Preemption: "cannot help: no running pods of lower priority"}
	var out bytes.Buffer
	printTree(&out, r)
	want := []string{
		"CompositePodGroup ml/job is pending: …",
		"",
		"CompositePodGroup ml/workers is in the tree of CompositePodGroup ml/job, which the scheduler places as one unit.",
		"1. Condition: none yet",
		"2. The tree, each node with its verdict in the scheduler's decision:",
		"   CompositePodGroup ml/job (gang, minGroupCount 2): does not count: 1 of 2 groups in zone=z1",
		"   ├── PodGroup ml/head (gang, minCount 1; 0 of 1 bound, 1 pending): counts in zone=z1",
		"   └── CompositePodGroup ml/workers (basic): not reached",
		"       └── PodGroup ml/w0 (gang, minCount 8; topology rack; 0 of 8 bound, 8 pending): not reached",
		"3. Preemption: cannot help: no running pods of lower priority",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimRight(out.String(), "\n"), "\n")); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
