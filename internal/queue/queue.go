// Package queue orders the units waiting to be scheduled: highest priority
// first, then oldest. A unit that did not fit is parked with an exponential
// backoff and comes back only when a cluster event could change the answer
// (MoveAllToActive) and its backoff has passed — no busy loop, no polling.
//
// Unit states:
//
//	        Add                 Pop               Done(fit)
//	(none) ────► active ──────────────► in flight ─────────► (none)
//	             ▲  ▲                    │        │
//	             │  │     Unschedulable  │        │ BeyondCapacity
//	             │  │                    ▼        ▼
//	             │  └─ event + backoff ─ parked   parked beyond capacity
//	             │                                 │
//	             └─── capacity event, Add, recheck ┘
//
// An Add or event for a unit in flight marks it dirty: it goes back to
// active when the cycle ends, so no update is lost (a unit parked beyond
// capacity: only an Add or capacity event, which also mark it changed).
//
// A unit that cannot fit even on empty nodes (BeyondCapacity) is parked
// apart: what frees capacity (a pod ending, a claim released) cannot help
// it, so MoveAllToActive leaves it; only capacity added or changed
// (CapacityChanged), its own change (Add), or CapacityRecheck brings it
// back. A gang of 10,000 on a cluster of 1,000 slots is then decided once,
// not again at every neighbour's departure.
//
// Active units are a heap on their (priority, creation) keys, computed when
// the unit is added (every change to a unit is an Add) and kept while it is
// parked or in flight: a pop costs O(log n), and never calls Order.
package queue

import (
	"container/heap"
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Key identifies a unit: a PodGroup, or a pod scheduled alone.
type Key struct {
	Kind            Kind
	Namespace, Name string
}

// Kind is what a Key names.
type Kind uint8

const (
	// Group is a PodGroup (Lockstep's, or the in-tree one of its name).
	Group Kind = iota
	// Pod is a pod that names no group.
	Pod
	// Tree is a scheduling tree, named by its root CompositePodGroup.
	Tree
	// Workload is a Kueue Workload whose placement check (Lockstep's
	// AdmissionCheck) waits for an answer: judged in the scheduling loop,
	// on the loop's own view, like a unit.
	Workload
	// Check is a Kueue AdmissionCheck Lockstep answers (cluster-scoped:
	// Namespace is empty), marked Active.
	Check
)

// GroupKey is the key of PodGroup ns/name.
func GroupKey(ns, name string) Key { return Key{Kind: Group, Namespace: ns, Name: name} }

// PodKey is the key of lone pod ns/name.
func PodKey(ns, name string) Key { return Key{Kind: Pod, Namespace: ns, Name: name} }

// TreeKey is the key of the tree rooted at CompositePodGroup ns/name.
func TreeKey(ns, name string) Key { return Key{Kind: Tree, Namespace: ns, Name: name} }

// WorkloadKey is the key of Kueue Workload ns/name's placement check.
func WorkloadKey(ns, name string) Key { return Key{Kind: Workload, Namespace: ns, Name: name} }

// CheckKey is the key of Kueue AdmissionCheck name.
func CheckKey(name string) Key { return Key{Kind: Check, Name: name} }

// ParseKey is the key of its String form; false when s is not one.
func ParseKey(s string) (Key, bool) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 {
		return Key{}, false
	}
	k := Key{Namespace: parts[1], Name: parts[2]}
	switch parts[0] {
	case "pg":
		k.Kind = Group
	case "pod":
		k.Kind = Pod
	case "tree":
		k.Kind = Tree
	case "workload":
		k.Kind = Workload
	case "admissioncheck":
		k.Kind = Check
	default:
		return Key{}, false
	}
	return k, k.Name != ""
}

// String is "pg/ns/name", "pod/ns/name", "tree/ns/name",
// "workload/ns/name" or "admissioncheck//name" (logs, nominations).
func (k Key) String() string {
	kind := "pg/"
	switch k.Kind {
	case Pod:
		kind = "pod/"
	case Tree:
		kind = "tree/"
	case Workload:
		kind = "workload/"
	case Check:
		kind = "admissioncheck/"
	}
	return kind + k.Namespace + "/" + k.Name
}

// Item is a unit as Pop hands it out: its key and the priority it was
// ordered by (Order's answer at its last Add), so a cycle needs no second
// priority lookup.
type Item struct {
	Key      Key
	Priority int32
}

// Order says how keys sort: priority (higher first) and creation time.
type Order func(Key) (priority int32, created time.Time)

// Queue is safe for concurrent use.
type Queue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	clock    clock.WithDelayedExecution
	order    Order
	active   *activeHeap
	sortKeys map[Key]sortKey   // of every unit the queue holds
	parked   map[Key]time.Time // key → earliest retry
	attempts map[Key]int
	inFlight map[Key]bool
	dirty    map[Key]bool
	// beyond are the parked units that cannot fit even on empty nodes;
	// changed are the units in flight dirtied by their own change or by
	// capacity (what wakes a unit beyond capacity), not only by capacity
	// freed.
	beyond  map[Key]bool
	changed map[Key]bool
	// paced are the units a WaitPaced cycle parked until a time, and
	// whether an event arrived for each (it is woken then).
	paced map[Key]pace
	// capacityGen counts CapacityChanged calls.
	capacityGen uint64
	closed      bool

	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// New returns an empty queue.
func New(clk clock.WithDelayedExecution, order Order) *Queue {
	q := &Queue{
		clock: clk, order: order,
		active: &activeHeap{index: map[Key]int{}}, sortKeys: map[Key]sortKey{},
		parked: map[Key]time.Time{}, attempts: map[Key]int{},
		inFlight: map[Key]bool{}, dirty: map[Key]bool{}, beyond: map[Key]bool{}, changed: map[Key]bool{},
		paced:          map[Key]pace{},
		InitialBackoff: time.Second, MaxBackoff: 10 * time.Second,
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add makes a unit active (a new or changed unit is retried at once) and
// records its order key as Order gives it now.
func (q *Queue) Add(k Key) {
	p, t := q.order(k)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sortKeys[k] = sortKey{key: k, priority: p, created: t}
	if q.inFlight[k] {
		q.dirty[k], q.changed[k] = true, true
		return
	}
	if pc, ok := q.paced[k]; ok && pc.until.After(q.clock.Now()) {
		if !pc.woken {
			q.paced[k] = pace{until: pc.until, woken: true}
			q.wakeAt(k, pc.until)
		}
		return
	}
	delete(q.paced, k)
	delete(q.parked, k)
	delete(q.beyond, k)
	q.activate(k)
	q.cond.Broadcast()
}

// activate puts k on the heap, or moves it to its current order key if it
// is there. Caller holds mu.
func (q *Queue) activate(k Key) {
	sk, ok := q.sortKeys[k]
	if !ok {
		p, t := q.order(k)
		sk = sortKey{key: k, priority: p, created: t}
		q.sortKeys[k] = sk
	}
	if i, ok := q.active.index[k]; ok {
		q.active.items[i] = sk
		heap.Fix(q.active, i)
		return
	}
	heap.Push(q.active, sk)
}

// MoveAllToActive is called on cluster events that may make parked units
// fit by freeing capacity (a pod ending, a claim released): each parked
// unit becomes active once its backoff has passed, except those beyond
// capacity.
func (q *Queue) MoveAllToActive() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moveAllLocked(false)
}

// CapacityChanged is MoveAllToActive for events that add or change
// capacity (a node, a ResourceSlice, a DeviceClass): the units beyond
// capacity come back too.
func (q *Queue) CapacityChanged() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.capacityGen++
	q.moveAllLocked(true)
}

// CapacityGeneration counts the CapacityChanged calls so far: a unit found
// beyond capacity at one generation still is at the same one, unless it
// changed itself.
func (q *Queue) CapacityGeneration() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.capacityGen
}

func (q *Queue) moveAllLocked(capacity bool) {
	now := q.clock.Now()
	for k, at := range q.parked {
		if q.beyond[k] {
			if !capacity {
				continue
			}
			delete(q.beyond, k)
		}
		if !at.After(now) {
			delete(q.parked, k)
			q.activate(k)
			continue
		}
		q.wakeAt(k, at)
	}
	for k := range q.inFlight {
		q.dirty[k] = true
		if capacity {
			q.changed[k] = true
		}
	}
	q.cond.Broadcast()
}

// wakeAt activates k at time at unless it was activated or forgotten first.
// Caller holds mu.
func (q *Queue) wakeAt(k Key, at time.Time) {
	q.clock.AfterFunc(at.Sub(q.clock.Now()), func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if t, ok := q.parked[k]; ok && t.Equal(at) && !q.beyond[k] {
			delete(q.parked, k)
			q.activate(k)
			q.cond.Broadcast()
		}
	})
}

// Pop blocks until a unit is active and returns the best one, or false when
// ctx ends.
func (q *Queue) Pop(ctx context.Context) (Item, bool) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.closed = true
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.Len() == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return Item{}, false
	}
	best := heap.Pop(q.active).(sortKey)
	q.inFlight[best.key] = true
	delete(q.paced, best.key)
	return Item{Key: best.key, Priority: best.priority}, true
}

// sortKey orders units: higher priority first, then older, then by key.
type sortKey struct {
	key      Key
	priority int32
	created  time.Time
}

func (a sortKey) before(b sortKey) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	return a.key.String() < b.key.String()
}

// activeHeap is a heap.Interface over the active units with their positions.
type activeHeap struct {
	items []sortKey
	index map[Key]int
}

func (h *activeHeap) Len() int           { return len(h.items) }
func (h *activeHeap) Less(i, j int) bool { return h.items[i].before(h.items[j]) }
func (h *activeHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].key], h.index[h.items[j].key] = i, j
}
func (h *activeHeap) Push(x any) {
	sk := x.(sortKey)
	h.index[sk.key] = len(h.items)
	h.items = append(h.items, sk)
}
func (h *activeHeap) Pop() any {
	last := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	delete(h.index, last.key)
	return last
}

// Done ends a cycle that placed the unit (or found nothing to do).
func (q *Queue) Done(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	delete(q.attempts, k)
	delete(q.changed, k)
	if !q.dirty[k] {
		delete(q.sortKeys, k) // it leaves the queue
	}
	q.requeueIfDirty(k)
}

// Unschedulable ends a cycle where the unit did not fit: it is parked with
// backoff (1s, 2s, 4s … up to MaxBackoff, as kube-scheduler) until an event
// moves it.
func (q *Queue) Unschedulable(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	delete(q.changed, k)
	at := q.backoff(k)
	q.parked[k] = at
	if q.dirty[k] {
		delete(q.dirty, k)
		q.wakeAt(k, at)
	}
}

// CapacityRecheck is how long a unit beyond capacity stays parked without
// an event that wakes it (as kube-scheduler flushes its unschedulable
// pods after 5 minutes): a change no event announced is seen then.
const CapacityRecheck = 5 * time.Minute

// BeyondCapacity ends a cycle where the unit cannot fit even on empty
// nodes: it is parked like Unschedulable (with backoff), but only capacity
// added or changed (CapacityChanged), its own change (Add), or recheck
// (CapacityRecheck after its last decision) makes it active again — not
// capacity freed (MoveAllToActive), which cannot help it. A capacity event
// or change of its own during the cycle wakes it after its backoff, as for
// Unschedulable.
func (q *Queue) BeyondCapacity(k Key, recheck time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	at := q.backoff(k)
	q.parked[k] = at
	if q.changed[k] {
		delete(q.changed, k)
		delete(q.dirty, k)
		q.wakeAt(k, at)
		return
	}
	delete(q.dirty, k)
	q.beyond[k] = true
	q.clock.AfterFunc(max(recheck, at.Sub(q.clock.Now())), func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if t, ok := q.parked[k]; ok && t.Equal(at) && q.beyond[k] {
			delete(q.parked, k)
			delete(q.beyond, k)
			q.activate(k)
			q.cond.Broadcast()
		}
	})
}

// Wait ends a cycle for a unit that cannot be attempted yet (members, claims
// or its PodGroup do not exist): it is parked without backoff, and the event
// that creates what it waits for makes it active at once.
func (q *Queue) Wait(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	delete(q.changed, k)
	q.parked[k] = q.clock.Now()
	if q.dirty[k] {
		delete(q.dirty, k)
		delete(q.parked, k)
		q.activate(k)
		q.cond.Broadcast()
	}
}

// pace is when a unit WaitPaced parked may run again, and whether an
// event asked for it meanwhile.
type pace struct {
	until time.Time
	woken bool
}

// WaitPaced is Wait for a unit whose cycle is dear (thousands of members,
// arriving one at a time): the event that makes it active does so gap after
// this cycle ended at the soonest, so it takes a bounded share of the loop
// however fast its members arrive. Its events meanwhile are one.
func (q *Queue) WaitPaced(k Key, gap time.Duration) {
	if gap <= 0 {
		q.Wait(k)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, k)
	delete(q.changed, k)
	until := q.clock.Now().Add(gap)
	q.parked[k] = until
	woken := q.dirty[k]
	q.paced[k] = pace{until: until, woken: woken}
	if woken {
		delete(q.dirty, k)
		q.wakeAt(k, until)
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
	delete(q.changed, k)
	if q.dirty[k] {
		delete(q.dirty, k)
		q.activate(k)
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
			q.activate(k)
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
	delete(q.changed, k)
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
		q.activate(k)
		q.cond.Broadcast()
	}
}

// Len is the number of units active or parked.
func (q *Queue) Len() (active, parked int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active.Len(), len(q.parked)
}
