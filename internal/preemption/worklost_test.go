package preemption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// TestFindTakesTheLeastWorkLost: among victims of one priority, the search
// takes the set that throws away the fewest device-hours since the last
// checkpoint (or since the start, without one) — not simply the gang
// started last — and a plan reports what it loses.
func TestFindTakesTheLeastWorkLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		// checkpointed is when gang "saved" (started 3h ago) last reported
		// a checkpoint, before now; 0: never.
		checkpointed time.Duration
		noClock      bool
		wantVictims  []string
		wantLost     float64
	}{{
		name: "a recent checkpoint makes the older gang the cheaper victim", checkpointed: 6 * time.Minute,
		wantVictims: []string{"saved-0", "saved-1"}, wantLost: 2 * 0.1,
	}, {
		name: "without a checkpoint the gang started last loses least", checkpointed: 0,
		wantVictims: []string{"fresh-0", "fresh-1"}, wantLost: 2 * 1,
	}, {
		name: "a checkpoint older than the last start counts from the start", checkpointed: 5 * time.Hour,
		wantVictims: []string{"fresh-0", "fresh-1"}, wantLost: 2 * 1,
	}, {
		name: "without a clock the last save still orders them, and nothing is counted", checkpointed: 6 * time.Minute, noClock: true,
		wantVictims: []string{"saved-0", "saved-1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			w := newWorld(t)
			now := w.start
			saved := whole("saved", 100, w.run("saved", 2, gpu, 3*time.Hour))
			if tc.checkpointed > 0 {
				saved.Annotations = map[string]string{lockv1.CheckpointedAtAnnotation: now.Add(-tc.checkpointed).Format(time.RFC3339)}
			}
			cands := []Candidate{saved, whole("fresh", 100, w.run("fresh", 2, gpu, time.Hour)), whole("filler", 10000, w.run("filler", 2, gpu, time.Hour))}
			Declare(cands, nil)
			ms := w.members("urgent", 2, gpu)
			snap := snapshot.New(w.in)
			in := Input{Unit: placement.Unit{Members: ms, MinCount: 2, Gang: true}, Priority: 1000, Candidates: cands, Now: now}
			if tc.noClock {
				in.Now = time.Time{}
			}
			plan, why, err := Find(ctx, snap, dra.New(snap, dra.NewCache()), in)
			if err != nil || plan == nil {
				t.Fatalf("no plan: %s %v", why, err)
			}
			if diff := cmp.Diff(tc.wantVictims, victimPods(plan)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			if got := plan.WorkLost(); got < tc.wantLost-0.001 || got > tc.wantLost+0.001 {
				t.Errorf("WorkLost = %.3f device-hours, want %.3f", got, tc.wantLost)
			}
		})
	}
}
