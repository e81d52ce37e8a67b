package scheduler

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"
)

// The pod status writes' pace rises while the API server answers them as
// fast as it does unloaded, steps back when a round's answers are slow or
// one is throttled, is not moved by one slow answer among fast ones, and
// never leaves [floor, ceiling].
func TestAdaptivePace(t *testing.T) {
	const fast, slow = 4 * time.Millisecond, 100 * time.Millisecond
	const perRound = 10
	busy := apierrors.NewTooManyRequests("busy", 1)
	gone := apierrors.NewNotFound(corev1.Resource("pods"), "p")
	// rounds are rounds of perRound answers, each answer the same unless
	// odd is set: then one answer of each round is odd.
	type rounds struct {
		n    int
		took time.Duration
		err  error
		odd  *answer
	}
	for _, tc := range []struct {
		name   string
		rounds []rounds
		// pause before the last Wait (0: none)
		pause time.Duration
		// yield: the scheduler has work someone waits on; resume: then
		// no more; after: fast rounds answered after those
		yield, resume bool
		after         int
		min, max      float64 // the pace at the end
	}{
		{name: "a new pace starts at the floor", min: paceFloor, max: paceFloor},
		{name: "fast rounds raise it by a quarter each", rounds: []rounds{{n: 2, took: fast}}, min: paceFloor * 1.25 * 1.25, max: paceFloor * 1.25 * 1.25},
		{name: "never above the ceiling", rounds: []rounds{{n: 40, took: fast}}, min: paceCeiling, max: paceCeiling},
		{name: "a slow answer among fast ones is jitter, not load", rounds: []rounds{{n: 40, took: fast, odd: &answer{took: slow}}}, min: paceCeiling, max: paceCeiling},
		{name: "answers within twice the base and the slack are not load", rounds: []rounds{{n: 5, took: fast}, {n: 40, took: 2*fast + paceSlack}}, min: paceCeiling, max: paceCeiling},
		{name: "a slow round steps it back by a fifth", rounds: []rounds{{n: 40, took: fast}, {n: 1, took: slow}}, min: paceCeiling * paceStepBack, max: paceCeiling * paceStepBack},
		{name: "a slow round undoes a fast one", rounds: []rounds{{n: 40, took: fast}, {n: 1, took: slow}, {n: 1, took: fast}}, min: paceCeiling * paceStepBack * 1.25, max: paceCeiling * paceStepBack * 1.25},
		{name: "slow rounds take it to the floor and no lower", rounds: []rounds{{n: 40, took: fast}, {n: 40, took: slow}}, min: paceFloor, max: paceFloor},
		{name: "a throttled write halves it", rounds: []rounds{{n: 40, took: fast}, {n: 1, took: fast, odd: &answer{err: busy}}}, min: paceCeiling / 2, max: paceCeiling / 2},
		{name: "a timed out write halves it", rounds: []rounds{{n: 40, took: fast}, {n: 1, took: fast, odd: &answer{err: apierrors.NewServerTimeout(corev1.Resource("pods"), "patch", 1)}}}, min: paceCeiling / 2, max: paceCeiling / 2},
		{name: "pods that are gone neither raise nor cut it", rounds: []rounds{{n: 40, took: fast, err: gone}}, min: paceFloor, max: paceFloor},
		{name: "after a pause it starts again from the floor", rounds: []rounds{{n: 40, took: fast}}, pause: paceRestartAfter + time.Second, min: paceFloor, max: paceFloor},
		{name: "the scheduler's own waiting work takes it to the trickle", rounds: []rounds{{n: 40, took: fast}}, yield: true, min: paceYielded, max: paceYielded},
		{name: "answers while it gives way do not lift the trickle", rounds: []rounds{{n: 40, took: fast}}, yield: true, after: 40, min: paceYielded, max: paceYielded},
		{name: "once that work is done it starts again from the floor", rounds: []rounds{{n: 40, took: fast}}, yield: true, resume: true, min: paceFloor, max: paceFloor},
		{name: "and rises again from there", rounds: []rounds{{n: 40, took: fast}}, yield: true, resume: true, after: 2, min: paceFloor * 1.25 * 1.25, max: paceFloor * 1.25 * 1.25},
		{name: "a short pause keeps it", rounds: []rounds{{n: 40, took: fast}}, pause: time.Second, min: paceCeiling, max: paceCeiling},
		{
			// The base is the lowest round median of the last minute or
			// two: a load that lasts becomes the new normal, and the pace
			// rises again over it.
			name:   "a lasting slowness becomes the base after two windows",
			rounds: []rounds{{n: 40, took: fast}, {n: int(2*paceWindow/paceRound) + 1, took: slow}, {n: 40, took: slow}},
			min:    paceCeiling, max: paceCeiling,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Unix(1e9, 0))
			p := newAdaptivePace(clk)
			for _, r := range tc.rounds {
				for i := 0; i < r.n; i++ {
					for j := 0; j < perRound; j++ {
						clk.Step(paceRound / perRound)
						if r.odd != nil && j == perRound/2 {
							p.observe(r.odd.took, r.odd.err)
							continue
						}
						p.observe(r.took, r.err)
					}
				}
			}
			clk.Step(tc.pause)
			if tc.yield {
				p.yield()
				if b := p.limiter.Burst(); b != 1 {
					t.Errorf("giving way with a burst of %d, want none (1)", b)
				}
			}
			if tc.resume {
				p.resume()
				if b := p.limiter.Burst(); b != paceBurst {
					t.Errorf("a burst of %d after giving way, want %d", b, paceBurst)
				}
			}
			for i := 0; i < tc.after*perRound; i++ {
				clk.Step(paceRound / perRound)
				p.observe(fast, nil)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = p.Wait(ctx) // a cancelled wait still applies the pause
			if got := p.rate(); got < tc.min-0.01 || got > tc.max+0.01 {
				t.Errorf("pace %.1f/s, want within [%.1f, %.1f]", got, tc.min, tc.max)
			}
			if got := float64(p.limiter.Limit()); got != p.rate() {
				t.Errorf("the limiter paces at %.1f/s, the pace says %.1f/s", got, p.rate())
			}
		})
	}
}

// answer is one write's answer: how long it took, and its error.
type answer struct {
	took time.Duration
	err  error
}
