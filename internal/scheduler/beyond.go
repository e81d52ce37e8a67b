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
	s.queue.BeyondCapacity(u.key, queue.CapacityRecheck)
}

// skipBeyond parks again, without a decision, a unit parked beyond
// capacity that comes back with nothing its verdict reads changed
// (beyondSig): an event for a pod it had already seen, delivered while it
// was decided, would otherwise have a gang of 10,000 decided again for
// nothing. It reports whether it did. The recheck still comes
// queue.CapacityRecheck after the last decision, not after the skip.
func (s *Scheduler) skipBeyond(u *unit) bool {
	m, ok := s.beyond[u.key]
	if !ok {
		return false
	}
	delete(s.beyond, u.key)
	left := queue.CapacityRecheck - s.clock.Since(m.at)
	if left <= 0 || u.beyondSig() != m.sig {
		return false
	}
	s.beyond[u.key] = m
	s.queue.BeyondCapacity(u.key, left)
	return true
}

// beyondSig is what a flat unit's beyond-capacity verdict reads: the
// nodes as of its cycle (the capacity generation), how many members are
// bound, its minCount, its pending members and their specs, its
// PodGroup's identity and spec.
func (u *unit) beyondSig() string {
	f := u.tree.Flat()
	if f == nil {
		return ""
	}
	h := fnv.New64a()
	for _, p := range f.Pending {
		// A pod's generation counts changes of its spec (its requests).
		_, _ = fmt.Fprintf(h, "%s/%d;", p.UID, p.Generation)
	}
	var group string
	if f.Group != nil {
		// A group replaced under its name starts at generation 1 again.
		group = fmt.Sprintf("%s/%d", f.Group.UID, f.Group.Generation)
	}
	return fmt.Sprintf("%d/%d/%d/%d/%s/%x", u.capacityGen, f.Bound, f.MinCount(), len(f.Pending), group, h.Sum64())
}
