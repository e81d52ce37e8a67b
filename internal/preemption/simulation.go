package preemption

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// simulation removes and restores candidates on the snapshot and asks
// whether the unit fits. Removal and restore are symmetric and may happen
// in any order.
type simulation struct {
	ctx   context.Context
	snap  *snapshot.Snapshot
	alloc *dra.Allocator
	unit  placement.Unit
	tree  *placement.TreeNode
	// users counts, per allocated claim, the reserving pods not removed.
	users map[types.NamespacedName]int
	// fitChecks counts placement simulations (for logs and tests).
	fitChecks int
	// pods caches what each candidate pod holds.
	pods map[*corev1.Pod]*held
	// budget bounds the simulations reprieve may spend; past it, what is
	// left is kept as victims (the plan stays proven, perhaps not minimal).
	budget int
}

// simulationSearchBudget bounds the placement search (placement's budget
// of node tries) of one simulation: a preemption runs up to tens of them.
const simulationSearchBudget = 2000

// reprieveBudget: at 5,000 nodes one simulation of a large gang costs tens
// of milliseconds; this keeps a preemption decision within seconds.
const reprieveBudget = 48

func newSimulation(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, unit placement.Unit, tree *placement.TreeNode) *simulation {
	if unit.SearchBudget == 0 {
		// Each candidate set is one simulation: search less per set.
		unit.SearchBudget = simulationSearchBudget
	}
	s := &simulation{ctx: ctx, snap: snap, alloc: alloc, unit: unit, tree: tree, users: map[types.NamespacedName]int{}, pods: map[*corev1.Pod]*held{}, budget: reprieveBudget}
	for key, c := range snap.Claims {
		if c.Status.Allocation != nil && len(c.Status.ReservedFor) > 0 {
			s.users[key] = len(c.Status.ReservedFor)
		}
	}
	return s
}

// held is what a running pod holds: node capacity and reserved claims.
type held struct {
	req    snapshot.Resources
	ports  []string
	claims []*resourcev1.ResourceClaim
}

func (s *simulation) held(p *corev1.Pod) *held {
	h := s.pods[p]
	if h == nil {
		h = &held{req: s.snap.Requests(p), ports: snapshot.HostPorts(p), claims: reservedClaims(s.snap, p)}
		s.pods[p] = h
	}
	return h
}

func (s *simulation) remove(c Candidate) {
	for _, p := range c.Pods {
		h := s.held(p)
		s.snap.RemovePod(p, h.req, h.ports)
		for _, claim := range h.claims {
			key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
			s.users[key]--
			if s.users[key] == 0 {
				s.snap.ReleaseClaim(claim)
			}
		}
	}
}

func (s *simulation) restore(c Candidate) {
	for _, p := range c.Pods {
		h := s.held(p)
		s.snap.RestorePod(p, h.req, h.ports)
		for _, claim := range h.claims {
			key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
			if s.users[key] == 0 {
				s.snap.HoldClaim(claim)
			}
			s.users[key]++
		}
	}
}

// fits simulates placing the unit and reports whether the result is
// what a preemption must reach (placement.Outcome.Sufficient).
func (s *simulation) fits() (placement.Result, bool, error) {
	s.fitChecks++
	if s.tree != nil {
		tr, err := placement.SimulateTree(s.ctx, s.snap, s.alloc, s.tree)
		return placement.Result{Assignments: tr.Assignments(), Placeable: len(tr.Assignments())}, tr.Admitted, err
	}
	res, err := placement.Simulate(s.ctx, s.snap, s.alloc, s.unit)
	if err != nil {
		return res, false, err
	}
	return res, placement.Judge(s.unit, res).Sufficient(), nil
}

// shortestPrefix finds the fewest leading candidates whose removal lets the
// unit fit, given that removing all of them does and removing none does
// not. On entry all are removed; on return exactly the prefix is.
func (s *simulation) shortestPrefix(cs []Candidate) (int, error) {
	cur := len(cs)
	set := func(k int) {
		for ; cur > k; cur-- {
			s.restore(cs[cur-1])
		}
		for ; cur < k; cur++ {
			s.remove(cs[cur])
		}
	}
	lo, hi := 0, len(cs)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		set(mid)
		_, ok, err := s.fits()
		if err != nil {
			set(len(cs))
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	set(hi)
	return hi, nil
}

// reprieve puts back as many of items (all removed, most valuable first)
// as the unit can spare and returns the rest: the victims. Halving keeps
// the number of simulations near victims × log(items). known: the items
// cannot all be put back (skips one simulation).
func (s *simulation) reprieve(items []Candidate, known bool) ([]Candidate, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if s.budget <= 0 {
		return items, nil
	}
	if !known {
		s.budget--
		for _, c := range items {
			s.restore(c)
		}
		_, ok, err := s.fits()
		if err != nil || ok {
			return nil, err
		}
		for _, c := range items {
			s.remove(c)
		}
	}
	if len(items) == 1 {
		return items, nil
	}
	half := (len(items) + 1) / 2
	first, err := s.reprieve(items[:half], false)
	if err != nil {
		return nil, err
	}
	second, err := s.reprieve(items[half:], len(first) == 0)
	if err != nil {
		return nil, err
	}
	return append(first, second...), nil
}

// reservedClaims are the pod's allocated claims that list it in reservedFor.
func reservedClaims(snap *snapshot.Snapshot, p *corev1.Pod) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, c := range podClaims(snap, p) {
		for _, r := range c.Status.ReservedFor {
			if r.UID == p.UID {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// podClaims are the pod's claims that the snapshot has allocated.
func podClaims(snap *snapshot.Snapshot, p *corev1.Pod) []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, name := range snapshot.PodClaimNames(p) {
		if c := snap.Claims[types.NamespacedName{Namespace: p.Namespace, Name: name}]; c != nil && c.Status.Allocation != nil {
			out = append(out, c)
		}
	}
	return out
}
