package preemption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestMinimumRuntimeIsHonoured: a running gang whose PodGroup asks for
// scheduling.lockstep.dev/min-runtime is no victim before it has run that
// long — the preemptor evicts nothing and says whom it spared until when —
// and a minimum that has passed spares nothing.
func TestMinimumRuntimeIsHonoured(t *testing.T) {
	for _, tc := range []struct {
		minRuntime string
		spared     bool
	}{{"1h", true}, {"1s", false}} {
		t.Run(tc.minRuntime, func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, 3*time.Minute)
			priorityClasses(t, ctx, h)
			gangJob(t, ctx, h, ns, "victim", 4, draGPU, classLow, nil, nil)
			before := waitRunning(t, ctx, h, ns, "victim", 4)
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, lockv1.MinRuntimeAnnotation, tc.minRuntime)
			if _, err := h.Dynamic.Resource(podgroup.Resource).Namespace(ns).Patch(ctx, "victim", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // the 1s minimum is over; the scheduler's cache has the annotation
			gangJob(t, ctx, h, ns, "preemptor", 4, draGPU, classUrgent, nil, nil)
			if !tc.spared {
				waitRunning(t, ctx, h, ns, "preemptor", 4)
				if n := stillRunning(t, ctx, h, ns, "victim", before); n != 0 {
					t.Errorf("%d of the victim's ranks still run after its minimum runtime passed", n)
				}
				return
			}
			want := fmt.Sprintf("within their minimum runtime: PodGroup %s/victim until ", ns)
			harness.Eventually(t, ctx, "a NotPreempting event naming the spared gang", func(ctx context.Context) (bool, string, error) {
				notes := eventNotes(t, ctx, h, ns, "PodGroup", "preemptor", "NotPreempting")
				return anyContains(notes, want), fmt.Sprintf("%q", notes), nil
			})
			// The event is recorded before the condition is written: wait
			// for the condition too.
			harness.Eventually(t, ctx, "the preemptor's condition naming the spared gang", func(ctx context.Context) (bool, string, error) {
				c, err := h.ScheduledCondition(ctx, ns, "preemptor")
				if err != nil || c == nil {
					return false, "", err
				}
				return strings.Contains(c.Message, want), c.Message, nil
			})
			time.Sleep(3 * time.Second)
			if n := stillRunning(t, ctx, h, ns, "victim", before); n != 4 {
				t.Errorf("%d of 4 ranks of the gang within its minimum runtime still run, want 4", n)
			}
		})
	}
}
