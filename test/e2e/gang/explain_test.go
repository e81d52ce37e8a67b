package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestExplainNamesTheGPUShortage(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "first", 4))
	gpuMembers(t, ctx, h, ns, "first", 4, "1")
	waitBound(t, ctx, h, ns, "first", 4)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "second", 4))
	gpuMembers(t, ctx, h, ns, "second", 4, "1")
	waitCondition(t, ctx, h, ns, "second", metav1.ConditionFalse, "Unschedulable")

	r := h.Explain(t, ns, "podgroup", "second")
	want := "PodGroup " + ns + "/second is pending: minCount 4 not satisfiable: at most 2 of 4 pods fit; 2 pods: no free device of class gpu.example.com (6 devices, 4 in use)"
	if r.Answer != want {
		t.Errorf("answer:\n want %q\n got  %q", want, r.Answer)
	}
	if len(r.Devices) != 1 || r.Devices[0].Total != 6 || r.Devices[0].Allocated != 4 {
		t.Fatalf("device evidence: want gpu.example.com 6 devices 4 allocated, got %+v", r.Devices)
	}
	held := 0
	for _, n := range r.Devices[0].PerNode {
		for _, to := range n.To {
			if strings.HasSuffix(to, "PodGroup "+ns+"/first") {
				held++
			}
		}
	}
	if held != 4 {
		t.Errorf("want the 4 allocated GPUs attributed to PodGroup first, got %d (%+v)", held, r.Devices[0].PerNode)
	}
	if len(r.Holders) != 1 || r.Holders[0].Preemptible {
		t.Errorf("holders: want PodGroup first, same priority, not preemptible; got %+v", r.Holders)
	}
	if want := "cannot help: no running pods of lower priority on the nodes the unit can use"; r.Preemption != want {
		t.Errorf("preemption: want %q (the scheduler's own search), got %q", want, r.Preemption)
	}
	// A pod of the group explains the group too.
	if p := h.Explain(t, ns, "pod", "second-0"); p.Answer != want {
		t.Errorf("explain pod: want the group's answer, got %q", p.Answer)
	}
}

func TestExplainNamesTheTaint(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	taintNode(t, ctx, h, "worker-2", corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "pinned", 2))
	for i := 0; i < 2; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("pinned-%d", i)).Member("pinned").Req(corev1.ResourceCPU, "1").Obj()
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "worker-2"}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(t, ctx, h, ns, "pinned", metav1.ConditionFalse, "Unschedulable")
	r := h.Explain(t, ns, "podgroup", "pinned")
	for _, want := range []string{"node(s) had untolerated taint {example.com/maintenance: true}", "didn't match Pod's node affinity/selector"} {
		if !strings.Contains(r.Answer, want) {
			t.Errorf("answer %q: want it to contain %q", r.Answer, want)
		}
	}
	reasons := map[string]int{}
	for _, rc := range r.Reasons {
		reasons[rc.Reason] = rc.Nodes
	}
	if reasons["node(s) had untolerated taint {example.com/maintenance: true}"] != 1 || reasons["node(s) didn't match Pod's node affinity/selector"] != 2 {
		t.Errorf("reasons: want 1 node tainted and 2 not matching the selector, got %v", reasons)
	}
}

func TestExplainGroupWithoutPods(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, time.Minute)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "empty", 8))
	r := h.Explain(t, ns, "podgroup", "empty")
	if !strings.Contains(r.Answer, "has no pods yet: 0 of minCount 8 exist") {
		t.Errorf("answer %q: want it to say the pods do not exist yet", r.Answer)
	}
}

func taintNode(t *testing.T, ctx context.Context, h *harness.Harness, node string, taint corev1.Taint) {
	t.Helper()
	n, err := h.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, taint)
	if _, err := h.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cur, err := h.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return
		}
		kept := cur.Spec.Taints[:0]
		for _, tt := range cur.Spec.Taints {
			if tt.Key != taint.Key {
				kept = append(kept, tt)
			}
		}
		cur.Spec.Taints = kept
		_, _ = h.Client.CoreV1().Nodes().Update(context.Background(), cur, metav1.UpdateOptions{})
	})
}
