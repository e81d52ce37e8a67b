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

// TestFindWaitsWhenAShortWaitCostsLess: a preemptor for whom a running
// gang that declared its end frees room soon waits for it — evicting
// nothing, counting on it as on pods already terminating — when the wait
// costs its devices fewer device-hours than the victims would lose; it
// evicts as before when the wait is longer than the bound, costs more, or
// no bound is set.
func TestFindWaitsWhenAShortWaitCostsLess(t *testing.T) {
	for _, tc := range []struct {
		name      string
		endsIn    time.Duration // the ending gang's declared end, from now
		victimAge time.Duration // how long the lower-priority gang has run
		shortWait time.Duration
		wantWait  bool
	}{
		{name: "2 minutes' wait against 6 device-hours", endsIn: 2 * time.Minute, victimAge: 3 * time.Hour, shortWait: 5 * time.Minute, wantWait: true},
		{name: "no wait without a bound", endsIn: 2 * time.Minute, victimAge: 3 * time.Hour},
		{name: "an end beyond the bound", endsIn: 10 * time.Minute, victimAge: 3 * time.Hour, shortWait: 5 * time.Minute},
		{name: "the wait costs more than the victim loses", endsIn: 2 * time.Minute, victimAge: time.Minute, shortWait: 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			w := newWorld(t)
			now := w.start
			ending := whole("ending", 10000, w.run("ending", 2, gpu, time.Hour))
			ending.Annotations = map[string]string{lockv1.MaxRuntimeAnnotation: (time.Hour + tc.endsIn).String()}
			cands := []Candidate{ending, whole("low", 100, w.run("low", 2, gpu, tc.victimAge)), whole("filler", 10000, w.run("filler", 2, gpu, time.Hour))}
			Declare(cands, nil)
			ms := w.members("urgent", 2, gpu)
			snap := snapshot.New(w.in)
			in := Input{Unit: placement.Unit{Members: ms, MinCount: 2, Gang: true}, Priority: 1000, Candidates: cands, Now: now, ShortWait: tc.shortWait}
			plan, why, err := Find(ctx, snap, dra.New(snap, dra.NewCache()), in)
			if err != nil || plan == nil {
				t.Fatalf("no plan: %s %v", why, err)
			}
			if !tc.wantWait {
				if diff := cmp.Diff([]string{"low-0", "low-1"}, victimPods(plan)); diff != "" || !plan.WaitUntil.IsZero() {
					t.Errorf("victims (-want,+got):\n%s; waits until %v", diff, plan.WaitUntil)
				}
				return
			}
			if len(plan.Victims) != 0 || !plan.WaitUntil.Equal(now.Add(tc.endsIn)) {
				t.Fatalf("plan evicts %v and waits until %v, want no victim and a wait until %v", victimPods(plan), plan.WaitUntil, now.Add(tc.endsIn))
			}
			if len(plan.Terminating) != 1 || plan.Terminating[0].Name != "PodGroup ns/ending" {
				t.Errorf("counts on %v, want the ending gang", candidateNames(plan.Terminating))
			}
			if want := "PodGroup ns/low (2 pods, priority 100), losing 6.0 device-hours"; plan.Instead != want {
				t.Errorf("Instead = %q, want %q", plan.Instead, want)
			}
			for _, a := range plan.Placement.Assignments {
				if a.Node != ending.Pods[0].Spec.NodeName {
					t.Errorf("%s placed on %s, want the ending gang's node %s", a.Pod.Name, a.Node, ending.Pods[0].Spec.NodeName)
				}
			}
		})
	}
}

func candidateNames(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
