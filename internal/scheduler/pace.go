package scheduler

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// The pod status writes are the scheduler's only elastic load: nothing
// waits on a pending member's condition but the user reading it, while a
// binding or another tenant's pod creation is on somebody's critical
// path. So they are paced between a floor and a ceiling by how the API
// server answers them, judged a round of answers at a time (a quarter
// second): the median answer of a round, not one slow answer, says
// whether the API server is loaded — one answer in twenty is slow on a
// busy machine for reasons that are nobody's load (a garbage collection, a
// descheduled thread), and cutting on each would keep the pace at the
// floor.
//
//   - the floor is kube-scheduler's client default, which paces all of its
//     writes: a cluster never gets fewer writes from Lockstep than from
//     kube-scheduler;
//   - a round whose median answer is within twice the base (plus a little
//     for jitter) raises the pace by a quarter, up to the ceiling: on an
//     API server nobody else is using, a gang of 10,000 tells its members
//     within the minute. The base is the lowest round median of the last
//     minute or two: how fast the API server answers when unloaded;
//   - a round whose median is slower steps it back by a fifth, down to the
//     floor: requests are queued beside ours, and ours step back. A fifth
//     undoes a round's rise, so the pace hovers just under the point where
//     answers slow (halving, it spent much of its time well below it);
//   - a round with a write throttled (429) or timed out halves it, down to
//     the floor: the API server says itself it is overloaded;
//   - while the scheduler itself has work someone waits on (units ready to
//     be decided, a gang's members or claims arriving, bindings in flight)
//     it gives way: the writes go at a trickle, one at a time with no
//     burst, and start again from the floor once that work is done. On a
//     small control plane every write slows every other, and a neighbour's
//     creation and binding are someone's wait while a large gang's
//     conditions are not (its members are told within the minute either
//     way); the trickle keeps the conditions moving however busy the
//     scheduler stays;
//   - after a pause it starts again from the floor, so a burst never opens
//     at the pace an earlier, idle moment allowed.
const (
	paceFloor   = pacedQPS
	paceCeiling = 400
	// paceBurst lets the first writes of a burst out at once, as
	// kube-scheduler's client burst does.
	paceBurst = pacedBurst
	// paceRound is how long a round of answers lasts.
	paceRound = 250 * time.Millisecond
	// paceWindow is how long the base is remembered: it is the lowest
	// round median of this window and the last one.
	paceWindow = time.Minute
	// paceSlack is added to twice the base before a round is slow, so the
	// jitter of a millisecond base is not taken for load.
	paceSlack = 5 * time.Millisecond
	// paceRestartAfter: a pause this long returns the pace to the floor.
	paceRestartAfter = 5 * time.Second
	// paceStepBack is what a slow round leaves of the pace.
	paceStepBack = 0.8
	// paceYielded is the trickle the writes keep while they give way.
	paceYielded = 10
)

// pacer is what the writer waits on before each write and tells how the
// write went.
type pacer interface {
	Wait(ctx context.Context) error
	observe(took time.Duration, err error)
	// rate is the current pace in writes per second.
	rate() float64
	// yield gives way to work someone waits on: the trickle, no burst,
	// until resume.
	yield()
	// resume ends a yield: the pace starts again from the floor.
	resume()
}

// adaptivePace is the pacer described above.
type adaptivePace struct {
	clock   clock.PassiveClock
	limiter *rate.Limiter

	mu sync.Mutex
	// cur is the pace now.
	cur float64
	// round holds the latencies of the current round's answers (started
	// at roundStart); throttled is set when one of them was a 429 or a
	// timeout.
	round      []time.Duration
	throttled  bool
	roundStart time.Time
	// base is the lowest round median of the current window (started at
	// windowStart), baseBefore that of the window before.
	base, baseBefore time.Duration
	windowStart      time.Time
	lastSeen         time.Time
	// yielding: the limiter is at the trickle (yield), whatever cur says.
	yielding bool
}

func newAdaptivePace(clk clock.PassiveClock) *adaptivePace {
	now := clk.Now()
	return &adaptivePace{clock: clk, limiter: rate.NewLimiter(paceFloor, paceBurst), cur: paceFloor, roundStart: now, windowStart: now, lastSeen: now}
}

func (p *adaptivePace) Wait(ctx context.Context) error {
	p.mu.Lock()
	if now := p.clock.Now(); now.Sub(p.lastSeen) > paceRestartAfter {
		// A new burst: the pace, the round and its answers start again.
		p.setLocked(paceFloor)
		p.round, p.throttled, p.roundStart, p.lastSeen = p.round[:0], false, now, now
	}
	p.mu.Unlock()
	return p.limiter.Wait(ctx)
}

func (p *adaptivePace) yield() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.yielding {
		return
	}
	p.yielding = true
	p.cur = paceFloor
	trickle(p.limiter)
}

func (p *adaptivePace) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.yielding {
		return
	}
	p.yielding = false
	p.cur = paceFloor
	restore(p.limiter, paceFloor, paceBurst)
}

// trickle sets a limiter to the trickle writes keep while they give way,
// with no burst: the tokens saved at a faster pace would let a round of
// writes out at once, just when they are to give way.
func trickle(l *rate.Limiter) {
	l.SetLimit(paceYielded)
	l.SetBurst(1)
}

// restore ends a trickle: the limiter is back at limit and burst.
func restore(l *rate.Limiter, limit rate.Limit, burst int) {
	l.SetBurst(burst)
	l.SetLimit(limit)
}

func (p *adaptivePace) rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.yielding {
		return paceYielded
	}
	return p.cur
}

func (p *adaptivePace) observe(took time.Duration, err error) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastSeen = now
	switch {
	case loaded(err):
		p.throttled = true
	case err == nil:
		p.round = append(p.round, took)
	}
	if now.Sub(p.roundStart) < paceRound {
		return
	}
	// The round is over: judge it.
	defer func() { p.round, p.throttled, p.roundStart = p.round[:0], false, now }()
	if now.Sub(p.windowStart) >= paceWindow {
		p.baseBefore, p.base, p.windowStart = p.base, 0, now
	}
	if p.throttled {
		p.setLocked(max(paceFloor, p.cur/2))
		return
	}
	if len(p.round) == 0 {
		return
	}
	slices.Sort(p.round)
	median := p.round[len(p.round)/2]
	if p.base == 0 || median < p.base {
		p.base = median
	}
	base := p.base
	if p.baseBefore > 0 && p.baseBefore < base {
		base = p.baseBefore
	}
	if median > 2*base+paceSlack {
		p.setLocked(max(paceFloor, p.cur*paceStepBack))
		return
	}
	p.setLocked(min(paceCeiling, p.cur*1.25))
}

// setLocked sets the pace (the limiter keeps its own, real time: the
// clock only dates the answers).
func (p *adaptivePace) setLocked(r float64) {
	p.cur = r
	if !p.yielding {
		p.limiter.SetLimit(rate.Limit(r))
	}
}

// loaded reports whether err says the API server is too busy: throttled
// (429), or timed out.
func loaded(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}
