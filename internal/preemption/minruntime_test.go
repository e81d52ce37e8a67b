package preemption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// TestFindSparesUnitsWithinTheirMinimumRuntime: a unit that has not run its
// minimum runtime is no victim — the search takes another or says whom it
// spared and until when — and is one again once the minimum has passed.
func TestFindSparesUnitsWithinTheirMinimumRuntime(t *testing.T) {
	for _, tc := range []struct {
		name        string
		need        int           // GPUs the preemptor needs (6 GPUs, all held)
		withOld     bool          // an old gang of 2 GPUs runs beside the young one of 4
		now         time.Duration // after the world's start
		wantVictims []string
		wantWhy     string
	}{{
		name: "the young gang is spared, the old one suffices", need: 2, withOld: true,
		wantVictims: []string{"old-0", "old-1"},
	}, {
		name: "without a minimum runtime the young gang would go (started last)", need: 2, withOld: true, now: time.Hour,
		wantVictims: []string{"young-0", "young-1", "young-2", "young-3"},
	}, {
		name: "only the spared gang would make room", need: 4, withOld: true,
		wantWhy: "evicting all 1 lower-priority candidates would not make room; more are within their minimum runtime: PodGroup ns/young until 2026-11-01T00:20:00Z",
	}, {
		name: "every candidate spared", need: 2,
		wantWhy: "the lower-priority units on the nodes the unit can use are within their minimum runtime: PodGroup ns/young until 2026-11-01T00:20:00Z",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			w := newWorld(t)
			cands := []Candidate{whole("young", 100, w.run("young", 4, gpu, 10*time.Minute))}
			if tc.withOld {
				cands = append(cands, whole("old", 100, w.run("old", 2, gpu, 2*time.Hour)))
			} else {
				cands = append(cands, whole("filler", 10000, w.run("filler", 2, gpu, 2*time.Hour)))
			}
			Declare(cands, func(Candidate) Terms { return Terms{MinRuntime: 30 * time.Minute} })
			ms := w.members("urgent", tc.need, gpu)
			snap := snapshot.New(w.in)
			in := Input{Unit: placement.Unit{Members: ms, MinCount: tc.need, Gang: true}, Priority: 1000, Candidates: cands, Now: w.start.Add(tc.now)}
			plan, why, err := Find(ctx, snap, dra.New(snap, dra.NewCache()), in)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantWhy != "" {
				if plan != nil {
					t.Fatalf("plan evicting %v, want none", victimPods(plan))
				}
				if why != tc.wantWhy {
					t.Errorf("why:\n got  %q\n want %q", why, tc.wantWhy)
				}
				return
			}
			if plan == nil {
				t.Fatalf("no plan: %s", why)
			}
			if diff := cmp.Diff(tc.wantVictims, victimPods(plan)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
		})
	}
}

// ProtectionEnds is the first end of a spared lower-priority unit's
// minimum runtime: when its preemptor should look again.
func TestProtectionEnds(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cs := []Candidate{
		{Name: "higher", Priority: 2000, ProtectedUntil: now.Add(time.Minute)},
		{Name: "later", Priority: 100, ProtectedUntil: now.Add(20 * time.Minute)},
		{Name: "sooner", Priority: 100, ProtectedUntil: now.Add(5 * time.Minute)},
		{Name: "over", Priority: 100, ProtectedUntil: now.Add(-time.Minute)},
		{Name: "none", Priority: 100},
	}
	if got, want := ProtectionEnds(cs, 1000, now), now.Add(5*time.Minute); !got.Equal(want) {
		t.Errorf("ProtectionEnds = %v, want %v", got, want)
	}
	if got := ProtectionEnds(cs[3:], 1000, now); !got.IsZero() {
		t.Errorf("ProtectionEnds with none spared = %v, want zero", got)
	}
}
