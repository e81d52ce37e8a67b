package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestResizeGangJob: scaling a gang Job (parallelism and completions
// together, an elastic Indexed Job) never restarts the ranks that stay.
// Up 2 → 4: the 2 keep running and the 2 added bind together; up 4 → 40
// (more GPUs than the cluster's 32): the 36 added wait whole, none bound,
// each saying why, while the 4 run on; down to 2: ranks 0 and 1 run on, the rest are
// removed, not lost. minCount follows parallelism throughout.
func TestResizeGangJob(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 5*time.Minute)
	gangJob(t, ctx, h, ns, "elastic", 2, true, nil)
	first := waitRunning(t, ctx, h, ns, "elastic", 2)

	scale(t, ctx, h, ns, "elastic", 4)
	four := waitRunning(t, ctx, h, ns, "elastic", 4)
	if n := stillRunning(t, ctx, h, ns, "elastic", first); n != 2 {
		t.Errorf("scaling up 2 → 4 restarted ranks: %d of the first 2 still run", n)
	}
	waitMinCount(t, ctx, h, ns, "elastic", 4)

	scale(t, ctx, h, ns, "elastic", 40)
	waitMinCount(t, ctx, h, ns, "elastic", 40)
	harness.Eventually(t, ctx, "40 ranks exist, the 36 added pending", func(ctx context.Context) (bool, string, error) {
		pods, bound, err := h.GroupPods(ctx, ns, "elastic")
		return len(pods) == 40 && bound == 4, fmt.Sprintf("%d pods, %d bound", len(pods), bound), err
	})
	time.Sleep(8 * time.Second)
	if _, bound, _ := h.GroupPods(ctx, ns, "elastic"); bound != 4 {
		t.Errorf("36 added ranks do not fit (32 GPUs): none may bind, but %d of 40 are bound", bound)
	}
	if n := stillRunning(t, ctx, h, ns, "elastic", four); n != 4 {
		t.Errorf("a resize that cannot fit yet restarted ranks: %d of 4 still run", n)
	}
	// Each added rank says why it waits (issue 28: they waited silently).
	harness.Eventually(t, ctx, "the 36 added ranks say why they wait", func(ctx context.Context) (bool, string, error) {
		pods, _, err := h.GroupPods(ctx, ns, "elastic")
		told, last := 0, ""
		for _, p := range pods {
			for _, c := range p.Status.Conditions {
				if p.Spec.NodeName == "" && c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, "PodGroup elastic") {
					told, last = told+1, c.Message
				}
			}
		}
		return told == 36, fmt.Sprintf("%d told, e.g. %q", told, last), err
	})

	scale(t, ctx, h, ns, "elastic", 2)
	waitMinCount(t, ctx, h, ns, "elastic", 2)
	harness.Eventually(t, ctx, "only ranks 0 and 1 left", func(ctx context.Context) (bool, string, error) {
		pods, _, err := h.GroupPods(ctx, ns, "elastic")
		live := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
				live++
			}
		}
		return live == 2, fmt.Sprintf("%d pods left", live), err
	})
	time.Sleep(6 * time.Second)
	if n := stillRunning(t, ctx, h, ns, "elastic", first); n != 2 {
		t.Errorf("scaling down restarted the ranks that stay: %d of ranks 0, 1 still run", n)
	}
	h.NoLifecycleRestart(t, ctx, ns, "elastic")
	st, err := h.State(ctx, ns, "elastic")
	if err != nil {
		t.Fatal(err)
	}
	// Added ranks that were still pending when minCount fell to 2 may have
	// been bound before the Job controller deleted them: members too, all
	// removed — none is a loss.
	if got := outcomes(st); st.RunningReason() != lockv1.RunningReasonRunning || st.Incarnation.Number != 1 || got[""] != 2 || got[lockv1.MemberRemoved] < 2 || got[lockv1.MemberSucceeded] != 0 {
		t.Errorf("want Running, incarnation 1 with 2 members running and the rest removed by the scale-down; got %s (outcomes %v)", st, got)
	}
}

// scale sets a Job's parallelism and completions to n.
func scale(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, n int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"parallelism":%d,"completions":%d}}`, n, n)
	if _, err := h.Client.BatchV1().Jobs(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling Job %s to %d: %v", name, n, err)
	}
}

func waitMinCount(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, n int32) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("minCount %d", n), func(ctx context.Context) (bool, string, error) {
		pg, err := h.PodGroup(ctx, ns, name)
		if err != nil {
			return false, "", err
		}
		return pg.Spec.SchedulingPolicy.Gang.MinCount == n, fmt.Sprintf("minCount %d", pg.Spec.SchedulingPolicy.Gang.MinCount), nil
	})
}
