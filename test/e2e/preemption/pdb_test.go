package preemption

import (
	"context"
	"fmt"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestPodDisruptionBudgetHonouredWhereAChoiceExists: two 2-rank gangs of
// priority 100 hold 4 of 6 GPUs and urgent needs 4, so one of them must go.
// Without a budget the most recently started ("newer") would; a
// PodDisruptionBudget allowing no disruption of newer (minAvailable 2)
// makes "older" go.
func TestPodDisruptionBudgetHonouredWhereAChoiceExists(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	priorityClasses(t, ctx, h)
	gangJob(t, ctx, h, ns, "older", 2, draGPU, classLow, nil, nil)
	older := waitRunning(t, ctx, h, ns, "older", 2)
	gangJob(t, ctx, h, ns, "newer", 2, draGPU, classLow, nil, nil)
	newer := waitRunning(t, ctx, h, ns, "newer", 2)

	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "newer"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			// minAvailable, not maxUnavailable: the disruption controller
			// cannot compute a Job's expected pods from a scale.
			MinAvailable: ptrIntStr(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/job-name": "newer"}},
		},
	}
	if _, err := h.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the disruption controller computed the budget", func(ctx context.Context) (bool, string, error) {
		cur, err := h.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "newer", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := cur.Status
		return st.ObservedGeneration == cur.Generation && st.ExpectedPods == 2 && st.CurrentHealthy == 2 && st.DisruptionsAllowed == 0,
			fmt.Sprintf("expected %d, healthy %d, allowed %d", st.ExpectedPods, st.CurrentHealthy, st.DisruptionsAllowed), nil
	})

	gangJob(t, ctx, h, ns, "urgent", 4, draGPU, classUrgent, nil, nil)
	waitRunning(t, ctx, h, ns, "urgent", 4)
	if n := stillRunning(t, ctx, h, ns, "newer", newer); n != 2 {
		t.Errorf("the PDB-protected gang lost %d of its 2 ranks although evicting the other sufficed", 2-n)
	}
	if n := stillRunning(t, ctx, h, ns, "older", older); n != 0 {
		t.Errorf("want the unprotected gang evicted whole, %d of its ranks still run", n)
	}
	for _, note := range eventNotes(t, ctx, h, ns, "PodGroup", "urgent", "Preempting") {
		if contains(note, "violated") {
			t.Errorf("no budget had to be violated, but the event says %q", note)
		}
	}
}

func ptrIntStr(v intstr.IntOrString) *intstr.IntOrString { return &v }

func contains(s, sub string) bool { return anyContains([]string{s}, sub) }
