package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestJobRanksFinishAtDifferentTimes: an 8-rank GPU Job whose ranks exit 0
// one after another (the simulator ends rank i after the i-th duration)
// completes normally: no restart, no eviction, every rank Succeeded, the
// Job Complete, the PodGroup Completed — and a finished rank's GPU is
// released while the others still run.
func TestJobRanksFinishAtDifferentTimes(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	gangJob(t, ctx, h, ns, "train", 8, true, map[string]string{"sim.lockstep.dev/succeed-after-by-index": "3s,6s,9s,12s,15s,18s,21s,24s"})
	waitRunning(t, ctx, h, ns, "train", 8)

	harness.Eventually(t, ctx, "rank 0 succeeded while the others run, its GPU released", func(ctx context.Context) (bool, string, error) {
		pods, _, err := h.GroupPods(ctx, ns, "train")
		if err != nil {
			return false, "", err
		}
		var first *corev1.Pod
		running := 0
		for i := range pods {
			p := &pods[i]
			if p.Labels[lockv1.JobCompletionIndexLabel] == "0" && podgroup.Succeeded(p) {
				first = p
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if first == nil {
			return false, "rank 0 not finished", nil
		}
		if running == 0 {
			t.Fatalf("every rank finished before rank 0's GPU could be checked")
		}
		for _, st := range first.Status.ResourceClaimStatuses {
			c, err := h.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *st.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				continue // deleted with its pod's end: released
			}
			if c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0 {
				return false, fmt.Sprintf("claim %s still allocated (reserved for %d)", c.Name, len(c.Status.ReservedFor)), nil
			}
		}
		return true, "", nil
	})

	harness.Eventually(t, ctx, "Job Complete", func(ctx context.Context) (bool, string, error) {
		done, err := jobCondition(ctx, h, ns, "train", batchv1.JobComplete)
		return done, "not complete", err
	})
	h.NoLifecycleRestart(t, ctx, ns, "train")
	if failed, _ := jobCondition(ctx, h, ns, "train", batchv1.JobFailed); failed {
		t.Errorf("the Job failed")
	}
	harness.Eventually(t, ctx, "PodGroup Completed", func(ctx context.Context) (bool, string, error) {
		st, err := h.State(ctx, ns, "train")
		return st.RunningReason() == lockv1.RunningReasonCompleted, st.String(), err
	})
	st, _ := h.State(ctx, ns, "train")
	if got := outcomes(st); st.Incarnation.Number != 1 || got[lockv1.MemberSucceeded] != 8 {
		t.Errorf("want incarnation 1 with 8 members Succeeded, got %s (outcomes %v)", st, got)
	}
}

// TestBarePodRanksFinishAtDifferentTimes: the same for a gang of bare pods
// (nothing would recreate them if they were restarted).
func TestBarePodRanksFinishAtDifferentTimes(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	pg := gangGroup(ns, "ranks", 4)
	h.CreatePodGroup(ctx, t, pg)
	barePods(t, ctx, h, ns, "ranks", 4, "1", func(i int) map[string]string {
		return map[string]string{"sim.lockstep.dev/succeed-after": fmt.Sprintf("%ds", 3+4*i)}
	})
	harness.Eventually(t, ctx, "every rank Succeeded", func(ctx context.Context) (bool, string, error) {
		pods, _, err := h.GroupPods(ctx, ns, "ranks")
		if err != nil {
			return false, "", err
		}
		done := 0
		for i := range pods {
			if podgroup.Succeeded(&pods[i]) {
				done++
			}
		}
		return done == 4 && len(pods) == 4, fmt.Sprintf("%d of %d succeeded", done, len(pods)), nil
	})
	h.NoLifecycleRestart(t, ctx, ns, "ranks")
	harness.Eventually(t, ctx, "PodGroup Completed", func(ctx context.Context) (bool, string, error) {
		st, err := h.State(ctx, ns, "ranks")
		return st.RunningReason() == lockv1.RunningReasonCompleted, st.String(), err
	})
}

func gangGroup(ns, name string, minCount int32) *lockv1.PodGroup {
	return &lockv1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       lockv1.PodGroupSpec{SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: minCount}}},
	}
}
