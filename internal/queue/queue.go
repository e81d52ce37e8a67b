// Package queue orders the units waiting to be scheduled: highest priority
// first, then oldest. A unit that did not fit is parked with an exponential
// backoff and comes back only when a cluster event could change the answer
// (MoveAllToActive) and its backoff has passed — no busy loop, no polling.
//
// Unit states:
//
//	        Add                 Pop               Done(fit)
//	(none) ────► active ──────────────► in flight ─────────► (none)
//	               ▲                        │ Unschedulable
//	               │  event + backoff over  ▼
//	               └──────────────────── parked
//
// An Add or event for a unit in flight marks it dirty: it goes back to
// active when the cycle ends, so no update is lost.
package queue

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Key identifies a unit, e.g. "pg/ns/name" or "pod/ns/name".
type Key string

// Order says how keys sort: priority (higher first) and creation time.
type Order func(Key) (priority int32, created time.Time)

// Queue is safe for concurrent use.
type Queue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	clock    clock.WithDelayedExecution
	order    Order
	active   map[Key]bool
	parked   map[Key]time.Time // key → earliest retry
	attempts map[Key]int
	inFlight map[Key]bool
	dirty    map[Key]bool
	closed   bool

	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// New returns an empty queue.
func New(clk clock.WithDelayedExecution, order Order) *Queue {
	q := &Queue{
		clock: clk, order: order,
		active: map[Key]bool{}, parked: map[Key]time.Time{}, attempts: map[Key]int{},
		inFlight: map[Key]bool{}, dirty: map[Key]bool{},
		InitialBackoff: time.Second, MaxBackoff: 10 * time.Second,
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add makes a unit active (a new or changed unit is retried at once).
func (q *Queue) Add(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inFlight[k] {
		q.dirty[k] = true
		return
	}
	delete(q.parked, k)
	q.active[k] = true
	q.cond.Broadcast()
}

// Forget drops a unit that no longer exists.
func (q *Queue) Forget(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.active, k)
	delete(q.parked, k)
	delete(q.attempts, k)
	delete(q.dirty, k)
}

// MoveAllToActive is called on cluster events that may make parked units
// fit: each parked unit becomes active once its backoff has passed.
func (q *Queue) MoveAllToActive() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for k, at := range q.parked {
		if !at.After(now) {
			delete(q.parked, k)
			q.active[k] = true
			continue
		}
		q.wakeAt(k, at)
	}
	for k := range q.inFlight {
		q.dirty[k] = true
	}
	q.cond.Broadcast()
}

// wakeAt activates k at time at unless it was activated or forgotten first.
// Caller holds mu.
func (q *Queue) wakeAt(k Key, at time.Time) {
	q.clock.AfterFunc(at.Sub(q.clock.Now()), func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if t, ok := q.parked[k]; ok && t.Equal(at) {
			delete(q.parked, k)
			q.active[k] = true
			q.cond.Broadcast()
		}
	})
}

// Pop blocks until a unit is active and returns the best one, or false when
// ctx ends.
func (q *Queue) Pop(ctx context.Context) (Key, bool) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.closed = true
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.active) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", false
	}
	best := q.best()
	delete(q.active, best)
	q.inFlight[best] = true
	return best, true
}

func (q *Queue) best() Key {
	var best Key
	var bp int32
	var bt time.Time
	first := true
	for k := range q.active {
		p, t := q.order(k)
		if first || p > bp || p == bp && (t.Before(bt) || t.Equal(bt) && k < best) {
			best, bp, bt, first = k, p, t, false
		}
	}
	return best
}

// Done ends a cycle that placed the unit (or found nothing to do).
func (q *Queue) Done(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	delete(q.attempts, k)
	q.requeueIfDirty(k)
}

// Unschedulable ends a cycle where the unit did not fit: it is parked with
// backoff (1s, 2s, 4s … up to MaxBackoff, as kube-scheduler) until an event
// moves it.
func (q *Queue) Unschedulable(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	at := q.backoff(k)
	q.parked[k] = at
	if q.dirty[k] {
		delete(q.dirty, k)
		q.wakeAt(k, at)
	}
}

// Wait ends a cycle for a unit that cannot be attempted yet (members, claims
// or its PodGroup do not exist): it is parked without backoff, and the event
// that creates what it waits for makes it active at once.
func (q *Queue) Wait(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	q.parked[k] = q.clock.Now()
	if q.dirty[k] {
		delete(q.dirty, k)
		delete(q.parked, k)
		q.active[k] = true
		q.cond.Broadcast()
	}
}

// WaitFor ends a cycle for a unit that waits on something events announce
// (e.g. the victims of its preemption terminating): like Wait, any event
// makes it active at once, without backoff; it also runs again after d at
// the latest, in case the awaited event never comes.
func (q *Queue) WaitFor(k Key, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	if q.dirty[k] {
		delete(q.dirty, k)
		q.active[k] = true
		q.cond.Broadcast()
		return
	}
	since := q.clock.Now()
	q.parked[k] = since
	q.clock.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if t, ok := q.parked[k]; ok && t.Equal(since) {
			delete(q.parked, k)
			q.active[k] = true
			q.cond.Broadcast()
		}
	})
}

// Retry ends a cycle that should run again after backoff regardless of
// events (an error, or waiting for an object to appear).
func (q *Queue) Retry(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	at := q.backoff(k)
	q.parked[k] = at
	delete(q.dirty, k)
	q.wakeAt(k, at)
}

// backoff counts a failed attempt and returns when the unit may run again.
// Caller holds mu.
func (q *Queue) backoff(k Key) time.Time {
	q.attempts[k]++
	d := q.InitialBackoff << min(q.attempts[k]-1, 16)
	if d > q.MaxBackoff || d <= 0 {
		d = q.MaxBackoff
	}
	return q.clock.Now().Add(d)
}

func (q *Queue) requeueIfDirty(k Key) {
	if q.dirty[k] {
		delete(q.dirty, k)
		q.active[k] = true
		q.cond.Broadcast()
	}
}

// Len is the number of units active or parked.
func (q *Queue) Len() (active, parked int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.active), len(q.parked)
}
