package topology

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cli/getcmd"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestTreeExplainedAndListed: a tree — job in one zone over w0 (2 pods of
// 12 CPUs in one rack) and w1 (3 such pods in one rack, which no rack of
// two 16-CPU nodes holds) — does not fit and binds nothing. `lockstep
// explain compositepodgroup` answers with the arithmetic the scheduler
// wrote on the root's condition and draws the tree with w1 not counting;
// `lockstep get cpg` lists the root with its 2 children and the
// condition's reason.
func TestTreeExplainedAndListed(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	job := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"}}
	job.Spec.SchedulingPolicy.Gang = &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 2}
	job.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: zone}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(lockv1.GroupVersion.WithKind("CompositePodGroup"))
	if _, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"w0": 2, "w1": 3} {
		pg := builders.GangPodGroup(ns, name, int32(n))
		pg.Spec.ParentCompositePodGroupName = ptr.To("job")
		pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: rack}}}
		h.CreatePodGroup(ctx, t, pg)
		for i := range n {
			p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", name, i)).Member(name).Req(corev1.ResourceCPU, "12").Obj()
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tree := "CompositePodGroup " + ns + "/job"
	var r explain.TreeReport
	harness.Eventually(t, ctx, "explain's answer is the arithmetic on the root's condition", func(ctx context.Context) (bool, string, error) {
		got, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Get(ctx, "job", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c, err := podgroup.CompositeFromUnstructured(got)
		if err != nil {
			return false, "", err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled)
		if cond == nil || cond.Reason != lockv1.PodGroupReasonUnschedulable {
			return false, fmt.Sprintf("condition %+v", cond), nil
		}
		r = runJSON[explain.TreeReport](t, h, "explain", "cpg", "job", "-n", ns)
		summary, ok := strings.CutPrefix(r.Answer, tree+" is pending: ")
		return ok && strings.Contains(cond.Message, summary), fmt.Sprintf("explain %q, condition %q", r.Answer, cond.Message), nil
	})
	if !strings.Contains(r.Answer, "PodGroup "+ns+"/w1: minCount 3 not satisfiable") {
		t.Errorf("explain's answer does not say why w1 fits nowhere: %q", r.Answer)
	}
	if r.Root == nil || len(r.Root.Children) != 2 {
		t.Fatalf("explain draws no tree of 2 children: %+v", r.Root)
	}
	verdicts := map[string]string{}
	for _, c := range r.Root.Children {
		verdicts[c.Name] = c.Verdict
	}
	if v := verdicts["PodGroup "+ns+"/w1"]; !strings.HasPrefix(v, "does not count in "+zone+"=") {
		t.Errorf("w1's verdict: want it not to count in a zone's rack, got %q (%v)", v, verdicts)
	}
	out, err := exec.Command(filepath.Join(h.BinDir, "lockstep"), "explain", "compositepodgroup/job", "-n", ns, "--kubeconfig", h.Kubeconfig).Output()
	if err != nil {
		t.Fatalf("lockstep explain compositepodgroup/job: %v", err)
	}
	if !strings.Contains(string(out), "2. The tree, each node with its verdict in the scheduler's decision:\n   "+tree+" (gang, minGroupCount 2; topology "+zone+"): does not count") {
		t.Errorf("explain does not draw the tree from its root:\n%s", out)
	}
	t.Logf("lockstep explain compositepodgroup/job:\n%s", out)

	rows := runJSON[[]getcmd.CompositeRow](t, h, "get", "cpg", "-n", ns)
	type row struct {
		Name, Policy, Status, Reason string
		Children                     int
	}
	var got []row
	for _, x := range rows {
		got = append(got, row{x.Name, x.Policy, x.Status, x.Reason, x.Children})
	}
	if diff := cmp.Diff([]row{{"job", "gang", "False", "Unschedulable", 2}}, got); diff != "" {
		t.Errorf("get cpg (-want,+got):\n%s", diff)
	}
	pods, bound, err := h.GroupPods(ctx, ns, "w0")
	if err != nil || len(pods) != 2 || bound != 0 {
		t.Errorf("w0, which fits alone, must hold nothing while its tree does not fit: %d pods, %d bound (%v)", len(pods), bound, err)
	}
}

// runJSON runs `lockstep ARGS -o json` and decodes its output.
func runJSON[T any](t *testing.T, h *harness.Harness, args ...string) T {
	t.Helper()
	var out T
	b, err := exec.Command(filepath.Join(h.BinDir, "lockstep"), append(args, "--kubeconfig", h.Kubeconfig, "-o", "json")...).Output()
	if err != nil {
		t.Fatalf("lockstep %s: %v", strings.Join(args, " "), err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding lockstep %s -o json: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}
