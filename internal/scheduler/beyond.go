package scheduler

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// beyondMemo is what a unit parked beyond capacity was decided on: the
// queue's capacity generation and what of the unit the verdict reads
// (sig), and when.
type beyondMemo struct {
	sig string
	at  time.Time
}

// beyondCapacity says why a flat unit cannot fit even on empty nodes
// (placement.BeyondCapacity), "" when it might or for a tree.
func (s *Scheduler) beyondCapacity(u *unit) string {
	f := u.tree.Flat()
	if f == nil {
		return ""
	}
	return placement.BeyondCapacity(s.state.Cache.Update(), f)
}

// parkBeyond parks a unit found beyond capacity, remembering what it was
// decided on.
func (s *Scheduler) parkBeyond(u *unit) {
	if s.beyond == nil {
		s.beyond = map[queue.Key]beyondMemo{}
	}
	s.beyond[u.key] = beyondMemo{sig: u.beyondSig(), at: s.clock.Now()}
	s.queue.BeyondCapacity(u.key)
}

// stillBeyond reports whether a unit parked beyond capacity comes back
// with nothing its verdict reads changed: no capacity event since, the
// same pending members, bound count and PodGroup spec. Its cycle is then
// skipped (an event for a pod it had already seen, delivered while it was
// decided, would otherwise have a gang of 10,000 decided again for
// nothing). After the queue's recheck interval it is decided regardless.
func (s *Scheduler) stillBeyond(u *unit) bool {
	m, ok := s.beyond[u.key]
	if !ok {
		return false
	}
	delete(s.beyond, u.key)
	if s.clock.Since(m.at) >= queue.CapacityRecheck || u.beyondSig() != m.sig {
		return false
	}
	s.beyond[u.key] = m
	return true
}

// beyondSig is what a flat unit's beyond-capacity verdict reads: the
// nodes as of its cycle (the capacity generation), its bound and pending
// members, its PodGroup's spec.
func (u *unit) beyondSig() string {
	f := u.tree.Flat()
	if f == nil {
		return ""
	}
	h := fnv.New64a()
	for _, p := range f.Pending {
		_, _ = h.Write([]byte(p.UID))
	}
	var gen int64
	if f.Group != nil {
		gen = f.Group.Generation
	}
	return fmt.Sprintf("%d/%d/%d/%d/%x", u.capacityGen, f.Bound, len(f.Pending), gen, h.Sum64())
}
