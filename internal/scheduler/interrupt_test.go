package scheduler

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// interruptFixture: gang batch/a (2 pods on gpu-0) asks for 10 minutes of
// notice, gang batch/b (2 pods on gpu-1) for none; both run their first
// incarnation.
func interruptFixture(t *testing.T) *fixture {
	t.Helper()
	f0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	objs := runningGang("batch", "a", "gpu-0", 2, 10, f0, map[string]string{lockv1.PreemptionNoticeAnnotation: "10m"}, true)
	objs = append(objs, runningGang("batch", "b", "gpu-1", 2, 10, f0, nil, true)...)
	f := newFixture(t, twoNodes, objs...)
	f.clock.Step(time.Hour)
	return f
}

// taint puts a taint on a node and waits until the scheduler sees it.
func (f *fixture) taint(node, key string) {
	f.t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(f.ctx, node, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	if _, err := f.client.CoreV1().Nodes().Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.waitFor("the taint", func() bool {
		n, err := f.s.listers.nodes.Get(node)
		return err == nil && interruptionOf(n) == key || err == nil && key == "aws-node-termination-handler/rebalance-recommendation" && len(n.Spec.Taints) > 0
	})
}

func ended(pg *lockv1.PodGroup) string {
	if inc := pg.Status.Incarnation; inc != nil && inc.Ended != nil {
		return inc.Ended.Reason + ": " + inc.Ended.Message
	}
	return ""
}

// A node that gets a Spot interruption taint tells the gangs on it: one
// that asked for notice gets it (at most the two minutes a Spot
// interruption allows), marked as for a preemption, and its incarnation
// ends — so it restarts whole elsewhere — when it acknowledges or the
// notice ends; one that asked for none ends at once. A node with no
// interruption taint (or a mere rebalance recommendation) changes
// nothing.
func TestInterruptionWithNotice(t *testing.T) {
	const spot = "aws-node-termination-handler/spot-itn"
	t.Run("notice, then the acknowledgement ends it", func(t *testing.T) {
		f := interruptFixture(t)
		f.taint("gpu-0", spot)
		f.s.interruptOnce(f.ctx)
		deadline := "2026-12-03T01:02:00Z"
		for _, name := range []string{"a-0", "a-1"} {
			if got := f.pod("batch", name).Annotations[lockv1.PreemptionPendingAnnotation]; got != deadline {
				t.Errorf("pod %s deadline %q, want %s (the Spot window)", name, got, deadline)
			}
		}
		if got := pendingCondition(f.group("batch", "a")); !strings.Contains(got, "True/NoticeGiven: Node gpu-0 is being interrupted (taint "+spot+")") {
			t.Errorf("PreemptionPending %q", got)
		}
		if got := ended(f.group("batch", "a")); got != "" {
			t.Fatalf("incarnation ended at the notice: %s", got)
		}
		if got := ended(f.group("batch", "b")); got != "" {
			t.Errorf("gang b, on a node that stays, was interrupted: %s", got)
		}
		f.annotate(&corev1.Pod{}, "batch", "a-0", lockv1.CheckpointedAtAnnotation, "2026-12-03T01:00:30Z")
		f.clock.Step(40 * time.Second)
		f.s.interruptOnce(f.ctx)
		if got := ended(f.group("batch", "a")); !strings.HasPrefix(got, lockv1.PodGroupReasonNodeInterrupted+": node gpu-0 is being interrupted") {
			t.Errorf("incarnation end %q, want %s", got, lockv1.PodGroupReasonNodeInterrupted)
		}
	})
	t.Run("notice, then the deadline ends it", func(t *testing.T) {
		f := interruptFixture(t)
		f.taint("gpu-0", "karpenter.sh/disruption")
		f.s.interruptOnce(f.ctx)
		f.clock.Step(119 * time.Second)
		f.s.interruptOnce(f.ctx)
		if got := ended(f.group("batch", "a")); got != "" {
			t.Fatalf("ended before the deadline: %s", got)
		}
		f.clock.Step(time.Second)
		f.s.interruptOnce(f.ctx)
		if got := ended(f.group("batch", "a")); !strings.HasPrefix(got, lockv1.PodGroupReasonNodeInterrupted) {
			t.Errorf("incarnation end %q at the deadline", got)
		}
	})
	t.Run("a gang that asked for no notice restarts at once", func(t *testing.T) {
		f := interruptFixture(t)
		f.taint("gpu-1", spot)
		f.s.interruptOnce(f.ctx)
		if got := ended(f.group("batch", "b")); !strings.HasPrefix(got, lockv1.PodGroupReasonNodeInterrupted) {
			t.Errorf("incarnation end %q", got)
		}
		if got := ended(f.group("batch", "a")); got != "" {
			t.Errorf("gang a, on a node that stays, was interrupted: %s", got)
		}
	})
	t.Run("no interruption, no change", func(t *testing.T) {
		f := interruptFixture(t)
		f.taint("gpu-0", "aws-node-termination-handler/rebalance-recommendation")
		f.client.ClearActions()
		f.s.interruptOnce(f.ctx)
		if w := f.writes(); len(w) != 0 {
			t.Errorf("wrote %v", w)
		}
		for _, g := range []string{"a", "b"} {
			if got := ended(f.group("batch", g)); got != "" {
				t.Errorf("gang %s interrupted: %s", g, got)
			}
		}
	})
}
