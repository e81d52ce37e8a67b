package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/webhook/config"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// Seed 004: two 4-rank jobs on 6 GPUs. Pod by pod: 3 + 3 running, nothing
// trains. Lockstep: one gang 4/4, the other 0/4 holding nothing.
func TestSeed004DeadlockCannotHappen(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "train-a", 4))
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "train-b", 4))
	// Interleave the ranks of both jobs, as two Job controllers would.
	for i := 0; i < 4; i++ {
		for _, g := range []string{"train-a", "train-b"} {
			pod := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", g, i)).Member(g).Req("cpu", "1").ClaimTemplate("gpu", "one-gpu").Obj()
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var winner, loser string
	harness.Eventually(t, ctx, "one gang 4/4 bound", func(ctx context.Context) (bool, string, error) {
		_, a, err := h.GroupPods(ctx, ns, "train-a")
		if err != nil {
			return false, "", err
		}
		_, b, err := h.GroupPods(ctx, ns, "train-b")
		if err != nil {
			return false, "", err
		}
		switch {
		case a == 4:
			winner, loser = "train-a", "train-b"
		case b == 4:
			winner, loser = "train-b", "train-a"
		}
		return winner != "", fmt.Sprintf("train-a %d bound, train-b %d bound", a, b), nil
	})
	c := waitCondition(t, ctx, h, ns, loser, metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable)
	// ... and, the cluster's nodes being no autoscaler's, what more
	// nodes would make it fit (issue 34).
	want := "minCount 4 not satisfiable: at most 2 of 4 pods fit; 2 pods: no free device of class gpu.example.com (6 devices, 4 in use); more nodes would make it fit: 1 more node of node pool worker (sim.gpu-2x in zone-a)"
	if c.Message != want {
		t.Errorf("condition message:\n want %q\n got  %q", want, c.Message)
	}
	waitCondition(t, ctx, h, ns, winner, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled)
	// Stable: the loser stays at zero and holds no device.
	time.Sleep(2 * time.Second)
	if _, bound, _ := h.GroupPods(ctx, ns, loser); bound != 0 {
		t.Errorf("%s: want 0 bound while %s runs, got %d", loser, winner, bound)
	}
	if bad, err := allocatedToUnbound(ctx, h, ns); err != nil || len(bad) > 0 {
		t.Errorf("devices allocated to unbound pods: %v (err %v)", bad, err)
	}

	// The scheduler's metrics tell the same story (docs/metrics.md).
	m := scrape(t, ctx, h)
	for name, atLeast := range map[string]float64{
		`lockstep_podgroup_schedule_attempts_total{result="scheduled"}`:                   1,
		`lockstep_podgroup_schedule_attempts_total{result="unschedulable"}`:               1,
		`lockstep_podgroup_time_to_scheduled_seconds_count{priority="0"}`:                 1,
		`lockstep_pending_entities{kind="podgroup",priority="0"}`:                         1,
		`lockstep_pending_oldest_seconds{kind="podgroup",priority="0"}`:                   1,
		`lockstep_device_allocation_failures_total{device_class="gpu.example.com"}`:       1,
		`lockstep_podgroup_scheduling_attempt_duration_seconds_count{result="scheduled"}`: 1,
		`lockstep_pod_status_write_pace`:                                                  50, // its floor
	} {
		if m[name] < atLeast {
			t.Errorf("metric %s = %v, want ≥ %v", name, m[name], atLeast)
		}
	}
	// The webhook's too: it admitted the members (controller-runtime's
	// webhook metrics, by path).
	wm := scrapeURL(t, ctx, h.Cluster.WebhookMetricsURL())
	for _, path := range []string{config.PathPodValidate, config.PathPodGroup} {
		if name := `controller_runtime_webhook_requests_total{code="200",webhook="` + path + `"}`; wm[name] < 1 {
			t.Errorf("webhook metric %s = %v, want ≥ 1", name, wm[name])
		}
	}
	if name := `controller_runtime_webhook_latency_seconds_count{webhook="` + config.PathPodValidate + `"}`; wm[name] < 1 {
		t.Errorf("webhook metric %s = %v, want ≥ 1", name, wm[name])
	}

	// The winner finishes (its pods go away): the loser gets all 4.
	if err := h.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=" + winner}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, h, ns, loser, 4)
	waitCondition(t, ctx, h, ns, loser, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled)
}

// Three gangs of 3, 3 and 4 on 6 GPUs: whatever the order, every gang ends
// all bound or all unbound, and no device is held by an unbound pod.
func TestGangsAreAllOrNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	sizes := map[string]int{"g3a": 3, "g3b": 3, "g4": 4}
	for g, n := range sizes {
		h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, g, int32(n)))
	}
	for g, n := range sizes {
		gpuMembers(t, ctx, h, ns, g, n, "500m")
	}
	harness.Eventually(t, ctx, "every gang decided (Scheduled or Unschedulable)", func(ctx context.Context) (bool, string, error) {
		decided, total := 0, 0
		state := ""
		for g, n := range sizes {
			_, bound, err := h.GroupPods(ctx, ns, g)
			if err != nil {
				return false, "", err
			}
			c, err := h.ScheduledCondition(ctx, ns, g)
			if err != nil {
				return false, "", err
			}
			if c != nil && (c.Reason == lockv1.PodGroupReasonScheduled && bound == n || c.Reason == lockv1.PodGroupReasonUnschedulable && bound == 0) {
				decided++
			}
			total += bound
			state += fmt.Sprintf("%s=%d/%d ", g, bound, n)
		}
		return decided == len(sizes), state, nil
	})
	total := 0
	for g, n := range sizes {
		_, bound, _ := h.GroupPods(ctx, ns, g)
		if bound != 0 && bound != n {
			t.Errorf("gang %s partially bound: %d of %d", g, bound, n)
		}
		total += bound
	}
	if total == 0 || total > 6 {
		t.Errorf("want some gangs running within 6 GPUs, got %d pods bound", total)
	}
	if bad, err := allocatedToUnbound(ctx, h, ns); err != nil || len(bad) > 0 {
		t.Errorf("devices allocated to unbound pods: %v (err %v)", bad, err)
	}
}

// A gang waits, without any attempt, until minCount members exist.
func TestGangWaitsForMembers(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "late", 3))
	gpuMembers(t, ctx, h, ns, "late", 2, "1")
	// The condition does not count members (it would be rewritten with
	// every member created); explain does.
	harness.Eventually(t, ctx, "condition WaitingForPods", func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, "late")
		if err != nil || c == nil {
			return false, "no condition", err
		}
		return c.Reason == lockv1.PodGroupReasonWaitingForPods && c.Message == "waiting for pods: fewer than minCount 3 members exist; none is placed until 3 do", c.Reason + ": " + c.Message, nil
	})
	r, err := explain.Run(ctx, h.Client, h.Dynamic, explain.Target{Kind: "podgroup", Namespace: ns, Name: "late"})
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	if !strings.Contains(r.Answer, "2 of minCount 3 exist") {
		t.Errorf("explain: want the answer to count 2 of minCount 3 members, got %q", r.Answer)
	}
	if _, bound, _ := h.GroupPods(ctx, ns, "late"); bound != 0 {
		t.Fatalf("want nothing bound before minCount members exist, got %d", bound)
	}
	pod := builders.MakePod().Namespace(ns).Name("late-2").Member("late").Req("cpu", "1").ClaimTemplate("gpu", "one-gpu").Obj()
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, h, ns, "late", 3)
}

// A pod naming a PodGroup that does not exist yet waits, with an event.
func TestPodWaitsForItsPodGroup(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	pod := builders.MakePod().Namespace(ns).Name("early").Member("later").Req("cpu", "1").Obj()
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "an event saying the PodGroup does not exist", func(ctx context.Context) (bool, string, error) {
		evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=early"})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.Reason == "WaitingForPodGroup" {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items)), nil
	})
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "later", 1))
	waitBound(t, ctx, h, ns, "later", 1)
}
