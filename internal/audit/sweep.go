package audit

import (
	"sort"
	"time"
)

// phase orders the events of one instant: timestamps have whole seconds,
// so a pod that ends and its replacement's creation often share one. Ends
// go first (a replacement does not look like growth), then creations,
// then bindings; a pod that ends the instant it began (bound, or created
// when never bound) ends last.
type phase int

const (
	phaseEnd phase = iota
	phaseCreate
	phaseBind
	phaseEndAtOnce
)

type event struct {
	at time.Time
	ph phase
	s  *span
}

func events(spans []*span) []event {
	var out []event
	for _, s := range spans {
		out = append(out, event{s.created, phaseCreate, s})
		last := s.created
		if s.bound != nil {
			out = append(out, event{*s.bound, phaseBind, s})
			last = *s.bound
		}
		if s.end != nil {
			ph := phaseEnd
			if !s.end.After(last) {
				ph = phaseEndAtOnce
			}
			out = append(out, event{*s.end, ph, s})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].at.Equal(out[j].at) {
			return out[i].at.Before(out[j].at)
		}
		return out[i].ph < out[j].ph
	})
	return out
}

// segment is an interval in which a workload's counts do not change.
type segment struct {
	from, to time.Time
	// holding pods are bound and not finished; done finished successfully;
	// pending are pods it needs that wait for a node.
	holding, done, pending int
	held                   devices
}

// partial reports whether the workload could not run in the segment: it
// held pods, waited for a pod it needs, and fewer than required ran or
// finished (required 0: every pod it had).
func (g segment) partial(required int) bool {
	return g.holding > 0 && g.pending > 0 && (required == 0 || g.holding+g.done < required)
}

// short reports whether fewer than required ran or finished while it held
// pods (required ≥ 1): what a preemption leaves behind.
func (g segment) short(required int) bool {
	return g.holding > 0 && g.holding+g.done < required
}

func (g segment) seconds() float64 { return g.to.Sub(g.from).Seconds() }

// sweepState is a workload's counts as its events are applied in order.
type sweepState struct {
	holding, done, pending, alive, maxAlive int
	held                                    devices
	refs                                    map[string]int
	// wholeSince: since when it has held pods with none it needs pending.
	wholeSince *time.Time
}

// sweep applies the events of the workload's spans in time order, marks
// each span needed or not, and returns the segments from its first event
// to now and the most pods it had at once.
func sweep(spans []*span, now time.Time, grace time.Duration) (segs []segment, maxAlive int) {
	evs := events(spans)
	st := &sweepState{held: devices{}, refs: map[string]int{}}
	for i, e := range evs {
		st.apply(e, grace)
		next := now
		if i+1 < len(evs) {
			next = evs[i+1].at
		}
		if next.After(e.at) {
			segs = append(segs, segment{from: e.at, to: next, holding: st.holding, done: st.done, pending: st.pending, held: st.held.clone()})
		}
	}
	return segs, st.maxAlive
}

func (st *sweepState) apply(e event, grace time.Duration) {
	s := e.s
	switch e.ph {
	case phaseCreate:
		// A pod created once the workload had run whole for grace, that
		// makes it larger than it ever was, is a scale-up: the workload
		// ran without it. A replacement (not larger) is needed.
		settled := st.wholeSince != nil && e.at.Sub(*st.wholeSince) >= grace
		s.needed = !(settled && st.alive+1 > st.maxAlive)
		st.alive++
		st.maxAlive = max(st.maxAlive, st.alive)
		if s.needed {
			st.pending++
		}
	case phaseBind:
		if s.needed {
			st.pending--
		}
		st.holding++
		s.devicesWith(st.held, st.refs, +1)
	default:
		switch {
		case s.bound != nil:
			st.holding--
			s.devicesWith(st.held, st.refs, -1)
			if s.succeeded {
				st.done++
			}
		case s.needed:
			st.pending--
		}
		st.alive--
	}
	whole := st.holding > 0 && st.pending == 0
	if !whole {
		st.wholeSince = nil
	} else if st.wholeSince == nil {
		t := e.at
		st.wholeSince = &t
	}
}

// episode is a maximal run of partial segments.
type episode struct {
	from, to time.Time
	// ongoing: it lasts until the audit.
	ongoing bool
	// deviceSeconds held during it, by resource.
	deviceSeconds map[string]float64
}

func (e episode) seconds() float64 { return e.to.Sub(e.from).Seconds() }

func episodes(segs []segment, required int, now time.Time) []episode {
	var out []episode
	var cur *episode
	for _, g := range segs {
		if !g.partial(required) {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, episode{from: g.from, deviceSeconds: map[string]float64{}})
			cur = &out[len(out)-1]
		}
		cur.to = g.to
		cur.ongoing = !g.to.Before(now)
		for r, n := range g.held {
			cur.deviceSeconds[r] += float64(n) * g.seconds()
		}
	}
	return out
}

// heldAfter are the device-seconds held from t while the workload stayed
// short of required.
func heldAfter(segs []segment, t time.Time, required int) float64 {
	var sum float64
	for _, g := range segs {
		if !g.to.After(t) {
			continue
		}
		if !g.short(required) {
			break
		}
		from := g.from
		if from.Before(t) {
			from = t
		}
		sum += float64(g.held.total()) * g.to.Sub(from).Seconds()
	}
	return sum
}
