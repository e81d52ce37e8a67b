package placement

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// attempt places members group by group, recording every change to the
// snapshot so a failed gang can be rolled back.
type attempt struct {
	ctx   context.Context
	snap  *snapshot.Snapshot
	alloc *dra.Allocator
	unit  Unit
	// dry: undo every change once the result is known (Simulate).
	dry bool
	// j records how to undo every change; base is where this attempt's
	// changes start in it (a tree's leaves share one journal).
	j    *journal
	base int
	// uses counts the pods this attempt placed on each claim: one claim can
	// be reserved for at most resourcev1.ResourceClaimReservedForMaxSize pods.
	uses map[types.NamespacedName]int
}

func (a *attempt) run(groups []*group) (Result, error) {
	var res Result
	for _, g := range groups {
		for _, mi := range g.members {
			asg, diag, err := a.placeMember(g, mi)
			if err != nil {
				a.rollback()
				return Result{}, err
			}
			if asg == nil {
				res.Unplaced = append(res.Unplaced, Failure{Pod: a.unit.Members[mi].Pod, Diagnosis: diag})
				continue
			}
			res.Assignments = append(res.Assignments, *asg)
		}
	}
	res.Placeable = len(res.Assignments)
	if !Judge(a.unit, res).Admitted {
		// Every member stays unbound and the snapshot as it was; the
		// result explains the ones that did not fit.
		a.rollback()
		res.Assignments = nil
	}
	if a.dry {
		a.rollback()
	}
	return res, nil
}

// newAttempt starts an attempt whose changes j records (a fresh journal
// when j is nil).
func newAttempt(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, unit Unit, dry bool, j *journal) *attempt {
	if j == nil {
		j = &journal{}
	}
	return &attempt{ctx: ctx, snap: snap, alloc: alloc, unit: unit, dry: dry, j: j, base: j.mark()}
}

// rollback undoes every change of this attempt.
func (a *attempt) rollback() { a.j.rewind(a.base) }

// rollbackTo undoes the changes made since the journal held mark.
func (a *attempt) rollbackTo(mark int) { a.j.rewind(mark) }

// journal is how to undo the changes placement made to a snapshot, in
// order: rewinding to a mark undoes those made since.
type journal struct{ undo []func() }

func (j *journal) push(f func()) { j.undo = append(j.undo, f) }

// mark is the journal's current position.
func (j *journal) mark() int { return len(j.undo) }

// rewind undoes the changes made since mark, newest first.
func (j *journal) rewind(mark int) {
	for i := len(j.undo) - 1; i >= mark; i-- {
		j.undo[i]()
	}
	j.undo = j.undo[:mark]
}

// placeOn places member mi of g on node ni if it fits there — capacity,
// the pod constraints against the pods placed so far, devices — and
// returns its assignment, or nil. The search's step; placeMember's is the
// same checks over the group's nodes in turn.
func (a *attempt) placeOn(g *group, mi int, ni *snapshot.NodeInfo) (*Assignment, error) {
	m := a.unit.Members[mi]
	if g.fits(a.snap, ni) != "" {
		return nil, nil
	}
	var check snapshot.PodCheck
	if a.snap.Constraints != nil {
		var err error
		if check, err = a.snap.Constraints.Prepare(a.ctx, m.Pod); err != nil {
			return nil, err
		}
		if check != nil {
			reason, err := check.Check(a.ctx, ni.Node.Name)
			if err != nil || reason != "" {
				return nil, err
			}
		}
	}
	asg, _, err := a.tryNode(g, m, ni)
	if err != nil || asg == nil {
		return nil, err
	}
	if check != nil {
		if asg.Volumes, err = check.Reserve(a.ctx, ni.Node.Name); err != nil {
			return nil, err
		}
		if r := asg.Volumes; r != nil {
			a.j.push(func() { r.Unreserve(a.ctx) })
		}
	}
	return asg, nil
}

// placeMember tries the group's nodes from its cursor on. A node that
// fails for capacity (resources, ports, devices, a claim's reservations) is
// full for the rest of the group: capacity only shrinks within an attempt.
// A node that fails the pod constraints (inter-pod affinity, topology
// spread) is tried again for the next member: members placed meanwhile can
// change the answer.
func (a *attempt) placeMember(g *group, mi int) (*Assignment, Diagnosis, error) {
	m := a.unit.Members[mi]
	var check snapshot.PodCheck
	if a.snap.Constraints != nil {
		var err error
		if check, err = a.snap.Constraints.Prepare(a.ctx, m.Pod); err != nil {
			return nil, Diagnosis{}, err
		}
	}
	var constrained map[string]int
	for i := g.cursor; i < len(g.feasible); i++ {
		if g.fullAt[i] != "" {
			continue
		}
		ni := g.order.at(i)
		if check != nil {
			reason, err := a.checkConstraints(check, g, m, ni)
			if err != nil {
				return nil, Diagnosis{}, err
			}
			if reason != "" {
				if constrained == nil {
					constrained = map[string]int{}
				}
				constrained[reason]++
				continue
			}
		}
		asg, reason, err := a.tryNode(g, m, ni)
		if err != nil {
			return nil, Diagnosis{}, err
		}
		if asg != nil {
			if check != nil {
				if asg.Volumes, err = check.Reserve(a.ctx, ni.Node.Name); err != nil {
					return nil, Diagnosis{}, err
				}
				if r := asg.Volumes; r != nil {
					a.j.push(func() { r.Unreserve(a.ctx) })
				}
			}
			return asg, Diagnosis{}, nil
		}
		g.markFull(i, reason)
	}
	diag := Diagnosis{Nodes: g.static.Nodes, Reasons: map[string]int{}}
	for _, counts := range []map[string]int{g.static.Reasons, g.full, constrained} {
		for r, n := range counts {
			diag.Reasons[r] += n
		}
	}
	if g.full[ReasonDevices] > 0 {
		claims, _ := resolve(a.snap, m)
		diag.DeviceClasses = append(requestedClasses(claims), g.extendedClasses(a.snap)...)
	}
	return nil, diag, nil
}

// checkConstraints checks the pod constraints on a node with room for the
// pod: a node without room fails for capacity first, as kube-scheduler
// reports the first filter that fails (resources come before affinity and
// spread in its order).
func (a *attempt) checkConstraints(check snapshot.PodCheck, g *group, m Member, ni *snapshot.NodeInfo) (string, error) {
	if g.fits(a.snap, ni) != "" {
		return "", nil
	}
	return check.Check(a.ctx, ni.Node.Name)
}

func (a *attempt) tryNode(g *group, m Member, ni *snapshot.NodeInfo) (*Assignment, string, error) {
	if reason := g.fits(a.snap, ni); reason != "" {
		return nil, reason, nil
	}
	claims, err := resolve(a.snap, m)
	if err != nil {
		return nil, "", err
	}
	for _, c := range claims {
		if reservations(c, m.Pod)+a.uses[claimKey(c)] >= resourcev1.ResourceClaimReservedForMaxSize {
			return nil, ReasonClaimReserved, nil
		}
	}
	var pending []*resourcev1.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation == nil {
			pending = append(pending, c)
			continue
		}
		ok, err := dra.NodeMatches(a.snap.Features.Allocator, ni.Node, c.Status.Allocation)
		if err != nil {
			return nil, "", err
		}
		if !ok {
			return nil, ReasonClaimNode, nil
		}
	}
	ext := g.extendedClaim(a.snap, m, ni)
	if ext != nil {
		pending = append(pending, ext.Claim)
	}
	var results []resourcev1.AllocationResult
	if len(pending) > 0 {
		if !mayFitDevices(a.snap, ni, pending) {
			return nil, ReasonDevices, nil
		}
		results, err = a.alloc.Allocate(a.ctx, ni, pending)
		if nf := (*dra.NodeFailure)(nil); errors.As(err, &nf) {
			return nil, ReasonAllocator + nf.Reason, nil
		}
		if err != nil {
			return nil, "", err
		}
		if results == nil {
			return nil, ReasonDevices, nil
		}
	}
	if ext != nil {
		pending, ext = pending[:len(pending)-1], a.assumeExtended(ext, &results[len(results)-1])
		results = results[:len(results)-1]
	}
	asg := a.assume(ni, m, g, claims, pending, results)
	asg.Extended = ext
	return asg, "", nil
}

// assumeExtended records the allocation of a pod's extended-resource claim
// and returns the claim as the binder must create it.
func (a *attempt) assumeExtended(ext *dra.ExtendedClaim, result *resourcev1.AllocationResult) *dra.ExtendedClaim {
	cp := ext.Claim.DeepCopy()
	cp.Status.Allocation = result.DeepCopy()
	a.snap.AssumeClaim(cp)
	a.j.push(func() { a.snap.ForgetClaim(cp) })
	return &dra.ExtendedClaim{Claim: cp, Mappings: ext.Mappings}
}

// assume records the placement in the snapshot (requests, ports, claim
// allocations) and how to undo it.
func (a *attempt) assume(ni *snapshot.NodeInfo, m Member, g *group, claims, pending []*resourcev1.ResourceClaim, results []resourcev1.AllocationResult) *Assignment {
	asg := &Assignment{Pod: m.Pod, Node: ni.Node.Name}
	allocated := map[*resourcev1.ResourceClaim]*resourcev1.ResourceClaim{}
	for i, c := range pending {
		cp := c.DeepCopy()
		cp.Status.Allocation = results[i].DeepCopy()
		allocated[c] = cp
		old := c
		a.snap.AssumeClaim(cp)
		a.j.push(func() { a.snap.UnassumeClaim(old, cp) })
	}
	if a.uses == nil {
		a.uses = map[types.NamespacedName]int{}
	}
	for _, c := range claims {
		key := claimKey(c)
		a.uses[key]++
		a.j.push(func() { a.uses[key]-- })
		if cp, ok := allocated[c]; ok {
			asg.Claims = append(asg.Claims, cp)
			asg.NewlyAllocated = append(asg.NewlyAllocated, true)
			continue
		}
		asg.Claims = append(asg.Claims, c)
		asg.NewlyAllocated = append(asg.NewlyAllocated, false)
	}
	a.snap.PlacePod(ni, m.Pod, g.req, g.ports)
	a.j.push(func() { a.snap.UnplacePod(ni, m.Pod, g.req, g.ports) })
	return asg
}

func requestedClasses(claims []*resourcev1.ResourceClaim) []string {
	var out []string
	for _, c := range claims {
		if c.Status.Allocation != nil {
			continue
		}
		for _, d := range dra.Demands(&c.Spec) {
			out = append(out, d.Classes[0]) // the first choice
		}
	}
	return out
}

// mayFitDevices is a necessary condition checked before the allocator runs:
// node-local claims need at least their fewest devices (dra.LeastDevices:
// the cheapest alternative, none for a request of All) free on the node.
// It answers true when devices outside the node may serve them, so it only
// ever saves work.
func mayFitDevices(snap *snapshot.Snapshot, ni *snapshot.NodeInfo, claims []*resourcev1.ResourceClaim) bool {
	if len(snap.GlobalSlices) > 0 {
		return true
	}
	need := int64(0)
	for _, c := range claims {
		need += dra.LeastDevices(&c.Spec)
	}
	return int64(ni.FreeDevices()) >= need
}

func claimKey(c *resourcev1.ResourceClaim) types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

// reservations counts the pods other than p a claim is reserved for.
func reservations(c *resourcev1.ResourceClaim, p *corev1.Pod) int {
	n := 0
	for _, r := range c.Status.ReservedFor {
		if r.UID != p.UID {
			n++
		}
	}
	return n
}
