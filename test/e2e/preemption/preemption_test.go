package preemption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestPreemptionTakesTheWholeLowerPriorityGang is seed 004's preemption
// scenario: low (priority 100) holds 4 of 6 accelerators, urgent (priority
// 10000) needs 4. All 4 of low go, urgent runs 4/4, low waits whole and
// runs 4/4 again when urgent finishes — with DRA devices, which upstream
// 1.37 cannot preempt, and with an extended resource.
func TestPreemptionTakesTheWholeLowerPriorityGang(t *testing.T) {
	for _, acc := range []accelerator{draGPU, extended} {
		t.Run(acc.String(), func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, 5*time.Minute)
			priorityClasses(t, ctx, h)
			gangJob(t, ctx, h, ns, "low", 4, acc, classLow, nil, nil)
			lowBefore := waitRunning(t, ctx, h, ns, "low", 4)

			created := time.Now()
			gangJob(t, ctx, h, ns, "urgent", 4, acc, classUrgent, nil, map[string]string{"sim.lockstep.dev/succeed-after": "15s"})
			harness.Eventually(t, ctx, "urgent bound 4/4", func(ctx context.Context) (bool, string, error) {
				_, bound, err := ranks(ctx, h, ns, "urgent")
				return bound == 4, fmt.Sprintf("%d bound", bound), err
			})
			t.Logf("%s: urgent created → 4/4 bound in %s", acc, time.Since(created).Round(10*time.Millisecond))

			if n := stillRunning(t, ctx, h, ns, "low", lowBefore); n != 0 {
				t.Errorf("urgent is bound but %d of low's original ranks still run: low left partially alive", n)
			}
			if _, bound, err := ranks(ctx, h, ns, "low"); err != nil || bound != 0 {
				t.Errorf("while urgent runs low must wait whole; %d of its ranks are bound (%v)", bound, err)
			}
			pg, err := h.PodGroup(ctx, ns, "low")
			if err != nil {
				t.Fatal(err)
			}
			if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.DisruptionTarget); c == nil || c.Reason != lockv1.PodGroupReasonPreemption {
				t.Errorf("low PodGroup: want DisruptionTarget/%s, got %+v", lockv1.PodGroupReasonPreemption, pg.Status.Conditions)
			}
			// Recorded once, by the scheduler, as a preemption: the
			// integrity controller neither restarts low nor counts a loss.
			harness.Eventually(t, ctx, "low's incarnation 1 ended by the preemption, low Preempted", func(ctx context.Context) (bool, string, error) {
				st, err := h.State(ctx, ns, "low")
				inc := st.Incarnation
				return inc != nil && inc.Number == 1 && inc.Ended != nil && inc.Ended.Reason == lockv1.PodGroupReasonPreemption &&
					st.RunningReason() == lockv1.RunningReasonPreempted, st.String(), err
			})
			urgentName := fmt.Sprintf("PodGroup %s/urgent (priority 10000)", ns)
			if notes := eventNotes(t, ctx, h, ns, "PodGroup", "low", "Preempted"); !anyContains(notes, "4 of 4 running pods preempted by "+urgentName) {
				t.Errorf("low PodGroup: want a Preempted event naming %q, got %q", urgentName, notes)
			}
			lowName := fmt.Sprintf("PodGroup %s/low (4 pods, priority 100)", ns)
			if notes := eventNotes(t, ctx, h, ns, "PodGroup", "urgent", "Preempting"); !anyContains(notes, "preempting "+lowName) {
				t.Errorf("urgent PodGroup: want a Preempting event naming %q, got %q", lowName, notes)
			}

			// urgent completes; low comes back whole.
			lowAfter := waitRunning(t, ctx, h, ns, "low", 4)
			for uid := range lowAfter {
				if _, old := lowBefore[uid]; old {
					t.Errorf("rank %s of low ran through the preemption", lowAfter[uid])
				}
			}
			if msg, err := jobFailed(ctx, h, ns, "low"); err != nil || msg != "" {
				t.Errorf("preemption failed the low Job (backoffLimit consumed?): %s %v", msg, err)
			}
			harness.Eventually(t, ctx, "low runs as incarnation 2", func(ctx context.Context) (bool, string, error) {
				st, err := h.State(ctx, ns, "low")
				return st.Incarnation != nil && st.Incarnation.Number == 2 && st.RunningReason() == lockv1.RunningReasonRunning, st.String(), err
			})
			h.NoLifecycleRestart(t, ctx, ns, "low")
		})
	}
}

// TestDisruptionModeSingleEvictsOnlyWhatIsNeeded: with 2 accelerators free,
// urgent needs 2 of a single-mode victim's pods, and the events say the
// victim is now partially alive.
func TestDisruptionModeSingleEvictsOnlyWhatIsNeeded(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	priorityClasses(t, ctx, h)
	gangJob(t, ctx, h, ns, "low", 4, draGPU, classLow, map[string]string{"scheduling.lockstep.dev/disruption-mode": "single"}, nil)
	lowBefore := waitRunning(t, ctx, h, ns, "low", 4)
	gangJob(t, ctx, h, ns, "urgent", 4, draGPU, classUrgent, nil, nil)
	waitRunning(t, ctx, h, ns, "urgent", 4)
	if n := stillRunning(t, ctx, h, ns, "low", lowBefore); n != 2 {
		t.Errorf("disruptionMode single: want 2 of low's 4 ranks evicted and 2 still running, %d still run", n)
	}
	notes := eventNotes(t, ctx, h, ns, "PodGroup", "low", "Preempted")
	if !anyContains(notes, "2 of 4 running pods preempted") || !anyContains(notes, "partially alive (2 pods still running)") {
		t.Errorf("low PodGroup: want an event saying 2 of 4 were preempted and the group is partially alive, got %q", notes)
	}
}

// TestNoPreemption: equal or higher priority is never a victim,
// preemptionPolicy Never never evicts, and a preemption that could not make
// room evicts nothing. Each case says why in a NotPreempting event.
func TestNoPreemption(t *testing.T) {
	cases := []struct {
		name                  string
		victimClass, preClass string
		preRanks              int32
		why                   string
	}{
		{"equal priority", classUrgent, classUrgent, 4, "preemption cannot help: no running pods of lower priority"},
		{"higher priority", classUrgent, classLow, 4, "preemption cannot help: no running pods of lower priority"},
		{"preemptionPolicy Never", classLow, classUrgentNever, 4, "preemptionPolicy Never (pod "},
		{"futile: 8 ranks on 6 GPUs", classLow, classUrgent, 8, "preemption cannot help: evicting all 1 lower-priority candidates would not make room"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, 2*time.Minute)
			priorityClasses(t, ctx, h)
			gangJob(t, ctx, h, ns, "victim", 4, draGPU, tc.victimClass, nil, nil)
			before := waitRunning(t, ctx, h, ns, "victim", 4)
			gangJob(t, ctx, h, ns, "preemptor", tc.preRanks, draGPU, tc.preClass, nil, nil)
			harness.Eventually(t, ctx, "a NotPreempting event on the preemptor says why", func(ctx context.Context) (bool, string, error) {
				notes := eventNotes(t, ctx, h, ns, "PodGroup", "preemptor", "NotPreempting")
				return anyContains(notes, tc.why), fmt.Sprintf("%q", notes), nil
			})
			c, err := h.ScheduledCondition(ctx, ns, "preemptor")
			if err != nil || c == nil || c.Status != metav1.ConditionFalse {
				t.Errorf("the preemptor must stay unscheduled: %+v %v", c, err)
			}
			// lockstep explain runs the same search and says the same.
			r, err := explain.Run(ctx, h.Client, h.Dynamic, explain.Target{Kind: "podgroup", Namespace: ns, Name: "preemptor"})
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimPrefix(tc.why, "preemption "); !strings.Contains(r.Preemption, want) {
				t.Errorf("explain: preemption %q, want it to contain %q", r.Preemption, want)
			}
			if n := stillRunning(t, ctx, h, ns, "victim", before); n != 4 {
				t.Errorf("%d of the victim's 4 ranks still run; nothing may be evicted", n)
			}
			if notes := eventNotes(t, ctx, h, ns, "PodGroup", "victim", "Preempted"); len(notes) > 0 {
				t.Errorf("victim PodGroup got Preempted events: %q", notes)
			}
		})
	}
}
