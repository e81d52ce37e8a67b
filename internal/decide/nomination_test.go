package decide

import (
	"context"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// The decision is a value: an expired nomination is reported in it
// (DropNomination) for the executor to drop — the preemption callback only
// reads — and a preemption still under way keeps its nomination.
func TestExpiredNominationIsInTheDecision(t *testing.T) {
	for name, tc := range map[string]struct {
		in       Preemption
		wantKind Kind
		wantDrop bool
	}{
		"expired, nothing to preempt": {in: Preemption{Expired: true}, wantKind: Unschedulable, wantDrop: true},
		"not expired":                 {in: Preemption{}, wantKind: Unschedulable},
		"still under way":             {in: Preemption{InProgress: "preempted 2 pods; waiting for 1"}, wantKind: Preempt},
	} {
		t.Run(name, func(t *testing.T) {
			snap := snapshot.New(snapshot.Input{Features: features.Default()})
			calls := 0
			in := Input{Priority: 100, Preemption: func() (*Preemption, error) {
				calls++
				p := tc.in
				return &p, nil
			}}
			kind, _, _, drop, err := preempt(context.Background(), snap, dra.New(snap, dra.NewCache()), in, preemption.Input{Unit: placement.Unit{Gang: true, MinCount: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if kind != tc.wantKind || drop != tc.wantDrop || calls != 1 {
				t.Errorf("kind %v drop %v (callback called %d times), want %v drop %v", kind, drop, calls, tc.wantKind, tc.wantDrop)
			}
		})
	}
}
