package queue

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestPopOrder(t *testing.T) {
	base := time.Unix(1000, 0)
	meta := map[Key]struct {
		p int32
		t time.Time
	}{
		g("low-old"):  {1, base},
		g("high-new"): {10, base.Add(time.Hour)},
		g("high-old"): {10, base},
	}
	q := New(clocktesting.NewFakeClock(base), func(k Key) (int32, time.Time) { return meta[k].p, meta[k].t })
	for k := range meta {
		q.Add(k)
	}
	ctx := context.Background()
	var got []Key
	for range meta {
		k := pop(q, ctx)
		got = append(got, k)
		q.Done(k)
	}
	want := []Key{g("high-old"), g("high-new"), g("low-old")}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order: want %v, got %v", want, got)
		}
	}
}

func TestUnschedulableWaitsForEventAndBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(clk, func(Key) (int32, time.Time) { return 0, time.Time{} })
	q.Add(g("a"))
	k := pop(q, context.Background())
	q.Unschedulable(k)

	if a, p := q.Len(); a != 0 || p != 1 {
		t.Fatalf("after a failed cycle: want 0 active 1 parked, got %d %d", a, p)
	}
	clk.Step(2 * time.Second) // backoff over, but no event yet: still parked
	if a, _ := q.Len(); a != 0 {
		t.Fatalf("after backoff without event: want parked, got %d active", a)
	}
	q.MoveAllToActive()
	if a, _ := q.Len(); a != 1 {
		t.Fatalf("after event: want active, got %d", a)
	}
}

func TestEventDuringBackoffWakesAtBackoffEnd(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(clk, func(Key) (int32, time.Time) { return 0, time.Time{} })
	q.Add(g("a"))
	k := pop(q, context.Background())
	q.Unschedulable(k)
	q.MoveAllToActive()
	clk.Step(1500 * time.Millisecond)
	if a, _ := q.Len(); a != 1 {
		t.Fatalf("an event during backoff must take effect when the backoff ends; active=%d", a)
	}
}

func TestAddDuringFlightIsNotLost(t *testing.T) {
	q := New(clocktesting.NewFakeClock(time.Unix(0, 0)), func(Key) (int32, time.Time) { return 0, time.Time{} })
	q.Add(g("a"))
	k := pop(q, context.Background())
	q.Add(g("a")) // e.g. a new member pod arrived mid-cycle
	q.Done(k)
	if a, _ := q.Len(); a != 1 {
		t.Fatalf("want the unit active again after Done, got %d active", a)
	}
}

func TestPopReturnsWhenContextEnds(t *testing.T) {
	q := New(clocktesting.NewFakeClock(time.Unix(0, 0)), func(Key) (int32, time.Time) { return 0, time.Time{} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { _, ok := q.Pop(ctx); done <- ok }()
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("Pop returned a key from an empty queue")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Pop did not return after cancel")
	}
}

func TestWaitIsNotBackedOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(clk, func(Key) (int32, time.Time) { return 0, time.Time{} })
	for i := 0; i < 5; i++ {
		q.Add(g("a"))
		k := pop(q, context.Background())
		q.Wait(k)
	}
	q.MoveAllToActive()
	if a, _ := q.Len(); a != 1 {
		t.Fatalf("a waiting unit must be active on the next event, however often it waited; active=%d", a)
	}
}

func TestWaitForWakesOnEventOrAfterLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(clk, func(Key) (int32, time.Time) { return 0, time.Time{} })
	q.Add(g("a"))
	k := pop(q, context.Background())
	q.WaitFor(k, 5*time.Second)
	if a, _ := q.Len(); a != 0 {
		t.Fatalf("right after WaitFor: want parked, got %d active", a)
	}
	q.MoveAllToActive()
	if a, _ := q.Len(); a != 1 {
		t.Fatalf("an event must wake a unit in WaitFor at once; active=%d", a)
	}

	k = pop(q, context.Background())
	q.WaitFor(k, 5*time.Second)
	clk.Step(4 * time.Second)
	if a, _ := q.Len(); a != 0 {
		t.Fatalf("before the limit without event: want parked, got %d active", a)
	}
	clk.Step(time.Second)
	if a, _ := q.Len(); a != 1 {
		t.Fatalf("at the limit: want active, got %d", a)
	}
}

// Order keys are taken when a unit is added: a unit whose priority changes
// (its Add) moves in the heap; a unit that leaves the queue leaves no key.
func TestOrderKeyFollowsAdd(t *testing.T) {
	prio := map[Key]int32{g("a"): 1, g("b"): 2, g("c"): 3}
	q := New(clocktesting.NewFakeClock(time.Unix(1000, 0)), func(k Key) (int32, time.Time) { return prio[k], time.Time{} })
	for _, k := range []Key{g("a"), g("b"), g("c")} {
		q.Add(k)
	}
	prio[g("a")] = 10 // a's group gained a higher-priority member
	q.Add(g("a"))
	ctx := context.Background()
	var got []Key
	for i := 0; i < 3; i++ {
		k := pop(q, ctx)
		got = append(got, k)
		q.Done(k)
	}
	if got[0] != g("a") || got[1] != g("c") || got[2] != g("b") {
		t.Errorf("order %v, want [a c b]", got)
	}
	if len(q.sortKeys) != 0 {
		t.Errorf("%d order keys left after every unit was done", len(q.sortKeys))
	}
}

// g is the key of PodGroup ns/name.
func g(name string) Key { return GroupKey("ns", name) }

// pop pops the next unit's key.
func pop(q *Queue, ctx context.Context) Key {
	it, _ := q.Pop(ctx)
	return it.Key
}

// Pop hands out the priority the unit was ordered by.
func TestPopCarriesPriority(t *testing.T) {
	q := New(clocktesting.NewFakeClock(time.Unix(1000, 0)), func(k Key) (int32, time.Time) { return 42, time.Time{} })
	q.Add(PodKey("ns", "p"))
	it, ok := q.Pop(context.Background())
	if !ok || it.Key != PodKey("ns", "p") || it.Priority != 42 {
		t.Errorf("Pop = %+v, %t; want pod/ns/p at priority 42", it, ok)
	}
	if got := it.Key.String(); got != "pod/ns/p" {
		t.Errorf("String() = %q, want pod/ns/p", got)
	}
}

// A unit beyond capacity is woken by capacity added, its own change, or
// the recheck — never by capacity freed; what happened during its cycle
// counts the same way.
func TestBeyondCapacityWakesOnlyOnCapacityOrOwnChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		// during runs while the unit is in flight, after the park.
		during, after func(q *Queue, clk *clocktesting.FakeClock)
		active        bool
	}{
		{name: "capacity freed", after: func(q *Queue, _ *clocktesting.FakeClock) { q.MoveAllToActive() }},
		{name: "capacity freed during its cycle", during: func(q *Queue, _ *clocktesting.FakeClock) { q.MoveAllToActive() }},
		{name: "backoff over, capacity freed", after: func(q *Queue, clk *clocktesting.FakeClock) {
			clk.Step(2 * time.Second)
			q.MoveAllToActive()
		}},
		{name: "capacity added", active: true, after: func(q *Queue, _ *clocktesting.FakeClock) { q.CapacityChanged() }},
		{name: "capacity added during its cycle", active: true, during: func(q *Queue, _ *clocktesting.FakeClock) { q.CapacityChanged() }},
		{name: "its own change", active: true, after: func(q *Queue, _ *clocktesting.FakeClock) { q.Add(g("huge")) }},
		{name: "its own change during its cycle", active: true, during: func(q *Queue, _ *clocktesting.FakeClock) { q.Add(g("huge")) }},
		{name: "the recheck", active: true, after: func(_ *Queue, clk *clocktesting.FakeClock) { clk.Step(CapacityRecheck) }},
		{name: "before the recheck", after: func(_ *Queue, clk *clocktesting.FakeClock) { clk.Step(CapacityRecheck - 3*time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			q := New(clk, func(Key) (int32, time.Time) { return 0, time.Time{} })
			q.Add(g("huge"))
			k := pop(q, context.Background())
			if tc.during != nil {
				tc.during(q, clk)
			}
			q.BeyondCapacity(k, CapacityRecheck)
			if tc.after != nil {
				tc.after(q, clk)
			}
			clk.Step(2 * time.Second) // past the first backoff
			if a, p := q.Len(); (a == 1) != tc.active || a+p != 1 {
				t.Errorf("active %d, parked %d; want active %v", a, p, tc.active)
			}
		})
	}
}

// Another unit parked Unschedulable still wakes on capacity freed beside
// one beyond capacity.
func TestCapacityFreedWakesOthers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(clk, func(Key) (int32, time.Time) { return 0, time.Time{} })
	q.Add(g("huge"))
	q.BeyondCapacity(pop(q, context.Background()), CapacityRecheck)
	q.Add(g("small"))
	q.Unschedulable(pop(q, context.Background()))
	clk.Step(2 * time.Second)
	q.MoveAllToActive()
	if got := pop(q, context.Background()); got != g("small") {
		t.Fatalf("popped %v, want small", got)
	}
	if a, p := q.Len(); a != 0 || p != 1 {
		t.Errorf("active %d, parked %d: want only huge parked", a, p)
	}
}

// A unit WaitPaced parked runs again on an event, but no sooner than its
// gap after its cycle; many events in the gap are one cycle; without an
// event it is not woken; a gap of zero is Wait.
func TestWaitPacedBoundsHowOftenEventsWakeIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		gap  time.Duration
		// during runs while the unit is in flight, after once it is parked.
		during, after func(q *Queue, clk *clocktesting.FakeClock)
		// active after each step of 50ms (4 steps: 50…200ms).
		active []int
	}{
		{name: "events in the gap wake it at its end", gap: 100 * time.Millisecond,
			after:  func(q *Queue, _ *clocktesting.FakeClock) { q.Add(g("a")); q.Add(g("a")); q.Add(g("a")) },
			active: []int{0, 1, 1, 1}},
		{name: "an event during its cycle wakes it at the gap's end", gap: 100 * time.Millisecond,
			during: func(q *Queue, _ *clocktesting.FakeClock) { q.Add(g("a")) },
			active: []int{0, 1, 1, 1}},
		{name: "no event: it stays parked", gap: 100 * time.Millisecond,
			active: []int{0, 0, 0, 0}},
		{name: "an event after the gap wakes it at once", gap: 100 * time.Millisecond,
			after: func(q *Queue, clk *clocktesting.FakeClock) {
				clk.Step(150 * time.Millisecond)
				q.Add(g("a"))
			},
			active: []int{1, 1, 1, 1}},
		{name: "gap zero is Wait", gap: 0,
			after:  func(q *Queue, _ *clocktesting.FakeClock) { q.Add(g("a")) },
			active: []int{1, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			q := New(clk, func(Key) (int32, time.Time) { return 0, time.Time{} })
			q.Add(g("a"))
			k := pop(q, context.Background())
			if tc.during != nil {
				tc.during(q, clk)
			}
			q.WaitPaced(k, tc.gap)
			if a, _ := q.Len(); a != 0 {
				t.Fatalf("right after WaitPaced: want parked, got %d active", a)
			}
			if tc.after != nil {
				tc.after(q, clk)
			}
			for i, want := range tc.active {
				clk.Step(50 * time.Millisecond)
				if a, _ := q.Len(); a != want {
					t.Fatalf("%v after the cycle: want %d active, got %d", time.Duration(i+1)*50*time.Millisecond, want, a)
				}
			}
			if tc.active[len(tc.active)-1] == 1 {
				k = pop(q, context.Background())
				if len(q.paced) != 0 {
					t.Errorf("a unit handed out still has a pace: %v", q.paced)
				}
				q.Done(k)
				if a, p := q.Len(); a != 0 || p != 0 {
					t.Errorf("once done: want nothing left, got %d active %d parked", a, p)
				}
			}
		})
	}
}
