package preemption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestGracefulPreemption: a running gang whose Job asks for
// scheduling.lockstep.dev/preemption-notice is told before it is evicted —
// its PodGroup and pods are marked PreemptionPending with the preemptor and
// the deadline, an event says so, each pod carries the deadline annotation
// — while its ranks keep running and the preemptor binds nothing; then it
// is evicted whole when it acknowledges (checkpointed-at on a member) or
// when the notice ends, never before, and the preemptor binds whole on
// what it freed. Its incarnation ends as a preemption, not a lost member.
func TestGracefulPreemption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		notice string
		ack    bool
	}{{"acknowledged", "10m", true}, {"the notice ends", "25s", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, 4*time.Minute)
			priorityClasses(t, ctx, h)
			gangJob(t, ctx, h, ns, "victim", 4, draGPU, classLow, map[string]string{lockv1.PreemptionNoticeAnnotation: tc.notice}, nil)
			before := waitRunning(t, ctx, h, ns, "victim", 4)
			gangJob(t, ctx, h, ns, "preemptor", 4, draGPU, classUrgent, nil, nil)

			var deadline time.Time
			harness.Eventually(t, ctx, "the victim's PreemptionPending condition", func(ctx context.Context) (bool, string, error) {
				pg, err := h.PodGroup(ctx, ns, "victim")
				if err != nil {
					return false, "", err
				}
				c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PreemptionPending)
				if c == nil || c.Status != metav1.ConditionTrue {
					return false, fmt.Sprintf("%+v", c), nil
				}
				if want := fmt.Sprintf("PodGroup %s/preemptor (priority", ns); !strings.Contains(c.Message, want) {
					return false, "", fmt.Errorf("condition %q does not name the preemptor (%q)", c.Message, want)
				}
				return true, "", nil
			})
			pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=victim"})
			if err != nil {
				t.Fatal(err)
			}
			var ackPod string
			for _, p := range pods.Items {
				if _, ok := before[p.UID]; !ok {
					continue
				}
				harness.Eventually(t, ctx, "the deadline annotation on "+p.Name, func(ctx context.Context) (bool, string, error) {
					cur, err := h.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
					if err != nil {
						return false, "", err
					}
					v := cur.Annotations[lockv1.PreemptionPendingAnnotation]
					d, err := time.Parse(time.RFC3339, v)
					if err != nil {
						return false, fmt.Sprintf("%q", v), nil
					}
					deadline = d
					return podCondition(cur, lockv1.PreemptionPending) == corev1.ConditionTrue, "no PreemptionPending condition on the pod", nil
				})
				ackPod = p.Name
			}
			if !anyContains(eventNotes(t, ctx, h, ns, "PodGroup", "victim", "PreemptionPending"), deadline.UTC().Format(time.RFC3339)) {
				t.Errorf("no PreemptionPending event on the victim's PodGroup names the deadline %s", deadline.UTC().Format(time.RFC3339))
			}
			time.Sleep(3 * time.Second)
			if n := stillRunning(t, ctx, h, ns, "victim", before); n != 4 {
				t.Fatalf("%d of 4 victim ranks run under notice, want 4", n)
			}
			if _, bound, err := ranks(ctx, h, ns, "preemptor"); err != nil || bound != 0 {
				t.Fatalf("the preemptor bound %d ranks (%v) while its victim still holds the devices", bound, err)
			}

			acked := time.Now()
			if tc.ack {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, lockv1.CheckpointedAtAnnotation, acked.UTC().Format(time.RFC3339))
				if _, err := h.Client.CoreV1().Pods(ns).Patch(ctx, ackPod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			waitRunning(t, ctx, h, ns, "preemptor", 4)
			if n := stillRunning(t, ctx, h, ns, "victim", before); n != 0 {
				t.Errorf("%d of the victim's ranks still run after the preemptor bound", n)
			}
			pg, err := h.PodGroup(ctx, ns, "victim")
			if err != nil {
				t.Fatal(err)
			}
			if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PreemptionPending); c == nil || c.Reason != lockv1.PreemptionPendingReasonEvicted {
				t.Errorf("victim's PreemptionPending after the eviction: %+v, want reason %s", c, lockv1.PreemptionPendingReasonEvicted)
			}
			if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.DisruptionTarget); c == nil || c.Reason != lockv1.PodGroupReasonPreemption {
				t.Errorf("victim's DisruptionTarget: %+v, want reason %s (a preemption, not a lost member)", c, lockv1.PodGroupReasonPreemption)
			}
			if !tc.ack {
				// Evicted at the deadline, not before: the preemptor could
				// only bind once the victim was gone.
				for name, at := range boundAt(t, ctx, h, ns, "preemptor") {
					if at.Before(deadline) {
						t.Errorf("preemptor pod %s bound at %s, before the victim's notice ended at %s", name, at, deadline)
					}
				}
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("the acknowledged victim was only evicted at its deadline %s", deadline)
			}
		})
	}
}

func podCondition(p *corev1.Pod, typ string) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if string(c.Type) == typ {
			return c.Status
		}
	}
	return ""
}

// boundAt is when each bound pod of a job was bound (its PodScheduled
// condition's transition).
func boundAt(t *testing.T, ctx context.Context, h *harness.Harness, ns, job string) map[string]time.Time {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				out[p.Name] = c.LastTransitionTime.Time
			}
		}
	}
	return out
}
