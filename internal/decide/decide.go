// Package decide is one scheduling decision as a value: from a snapshot and
// a unit to what should happen — bind these assignments, preempt with this
// plan, wait for this reason, unschedulable with this summary, or an error.
// Every unit is a scheduling tree (podgroup.ResolveTree); a flat PodGroup
// or a lone pod is a tree of one leaf (podgroup.Single), placed exactly as
// placement.Place places it. Decide places the tree all or nothing from
// its root (placement.PlaceTree); each leaf's part reads as a single
// leaf's decision (Decision.Leaf). Preemption is searched only for what
// does not fit, through a callback that reads (the candidates, or that an
// earlier preemption is still under way); what the executor must do about
// an earlier nomination travels in the decision (DropNomination).
//
// It writes nothing and keeps no state: the scheduler's executor turns a
// decision into API writes and exactly one queue transition; explain,
// simulate, the benchmarks and the golden scenario tests (testdata/) call
// the same function.
package decide

import (
	"context"
	"errors"
	"fmt"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// Kind is what a Decision says to do.
type Kind string

const (
	// Bind the Result's assignments: the unit is admitted (a gang's bound
	// and placed members reach minCount). Members that did not fit stay
	// pending (Outcome.Waiting; Summary says why).
	Bind Kind = "Bind"
	// Preempt: evict Plan's victims; the unit is nominated for
	// Plan.Placement. Without a Plan a preemption for the unit is already
	// under way (Reason).
	Preempt Kind = "Preempt"
	// Wait: the unit cannot be attempted yet (Reason, WaitReason).
	Wait Kind = "Wait"
	// Unschedulable: the unit does not fit (Summary) and preemption cannot
	// help (Reason says why, when it was considered).
	Unschedulable Kind = "Unschedulable"
	// Error: the decision could not be made (Err).
	Error Kind = "Error"
)

// Input is what a decision reads besides the snapshot.
type Input struct {
	// Unit is the unit to place: a scheduling tree (podgroup.ResolveTree),
	// or a flat PodGroup or lone pod as a tree of one leaf
	// (podgroup.Single).
	Unit *podgroup.TreeUnit
	// Priority is the unit's (its members' lowest).
	Priority int32
	// Preemption, when set, is called only for a unit that does not fit,
	// for what a preemption search needs; nil (or a nil result) means
	// preemption is not considered.
	Preemption func() (*Preemption, error)
	// DryRun leaves snap as Decide found it whatever the decision (a
	// what-if: Kueue's admission check judges a workload before its pods
	// exist, on the scheduler's own snapshot).
	DryRun bool
}

// Preemption is what a unit that does not fit may preempt.
type Preemption struct {
	// Candidates are everything running (preemption.Candidates).
	Candidates []preemption.Candidate
	PDBs       []*policyv1.PodDisruptionBudget
	// Stuck are pods evicted before that did not go.
	Stuck sets.Set[types.UID]
	// InProgress, when set, says this unit's earlier preemption is still
	// under way (its victims terminating): no new one is planned.
	InProgress string
	// Expired: the unit's earlier nomination ran out (its victims went, or
	// did not go by its deadline). The decision says so (DropNomination)
	// and the executor drops it: the callback only reads.
	Expired bool
	// Now judges the candidates' minimum runtime (their ProtectedUntil).
	Now time.Time
	// ShortWait bounds how long the unit waits for candidates that
	// declared their end instead of evicting (preemption.Input.ShortWait).
	ShortWait time.Duration
	// Delayed, when set, says the unit may not preempt yet (its preemption
	// delay): no search runs, and the decision's reason says this.
	Delayed string
}

// Decision is what one cycle decided for a unit.
type Decision struct {
	Kind Kind
	// Root is the unit as placement saw it (nil when it waits before
	// placement): a tree, whose leaves are PodGroups' (or a lone pod's)
	// units. Nodes maps each of its nodes back to the resolved tree (a
	// leaf's podgroup.Unit is Nodes[n].Unit). Tree is what placement gave:
	// each leaf's result, each node's verdict.
	Root  *placement.TreeNode
	Nodes map[*placement.TreeNode]*podgroup.Tree
	Tree  placement.TreeResult
	// Unit, Result and Outcome are one leaf's: the root's when the unit is
	// a single leaf, the leaf's in a decision Leaf returns. Result has the
	// leaf's assignments (Bind) or what did not fit; Outcome what the
	// result means (placement.Judge): admitted or not, who waits.
	Unit    placement.Unit
	Result  placement.Result
	Outcome placement.Outcome
	// Summary says what did not fit ("" when everything did).
	Summary string
	// Plan is the preemption to carry out (Preempt).
	Plan *preemption.Plan
	// Reason: why the unit waits (Wait), the preemption under way
	// (Preempt without Plan), or why preemption cannot help
	// (Unschedulable). WaitReason is the PodGroup condition reason of a
	// Wait ("" for WaitingForPods).
	Reason, WaitReason string
	Err                error
	// DropNomination: the unit's earlier nomination ran out
	// (Preemption.Expired); the executor drops it before acting on the
	// decision (a new plan nominates again).
	DropNomination bool
}

// Decide decides one unit on snap, all or nothing at its root
// (placement.PlaceTree; a single leaf is placed as placement.Place places
// it). A unit that is placed stays placed in snap (the caller assumes it);
// one that is not leaves snap as it found it, and is offered preemption as
// a whole.
func Decide(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, in Input) Decision {
	t := in.Unit
	if t.Waiting != "" {
		return Decision{Kind: Wait, Reason: t.Waiting, WaitReason: t.WaitReason}
	}
	d := Decision{Nodes: map[*placement.TreeNode]*podgroup.Tree{}}
	root, missing := d.node(snap, t.Root)
	if missing != "" {
		return Decision{Kind: Wait, Reason: missing}
	}
	d.Root = root
	place := placement.PlaceTree
	if in.DryRun {
		place = placement.SimulateTree
	}
	// One allocator for the decision: a preemption search asks it much
	// of what placing the unit asked (its answers are remembered).
	alloc := dra.New(snap, cache)
	res, err := place(ctx, snap, alloc, root)
	if root.Leaf != nil {
		d.Unit, d.Result = *root.Leaf, res.Leaves[root]
	}
	if err != nil {
		d.Kind, d.Err = Error, err
		return d
	}
	d.Tree = res
	if root.Leaf != nil {
		d.Outcome = placement.Judge(d.Unit, d.Result)
		d.Summary = placement.Summary(ctx, snap, cache, d.Outcome)
	} else if !res.Admitted {
		d.Summary = placement.TreeSummary(ctx, snap, res, root, func(n *placement.TreeNode, r placement.Result) string {
			return placement.Summary(ctx, snap, cache, placement.Judge(*n.Leaf, r))
		})
	}
	if res.Admitted {
		// What was placed binds; members that did not fit stay pending
		// (each leaf's Outcome.Waiting) and join the incarnation as they
		// fit.
		d.Kind = Bind
		return d
	}
	// Not admitted: placement left snap as it found it, so preemption
	// searches the cluster as it is.
	d.Kind = Unschedulable
	if who := forbidsPreemption(t.Root); who != "" {
		d.Reason = "preemptionPolicy Never (" + who + "): no preemption"
		return d
	}
	target := preemption.Input{Tree: root}
	if root.Leaf != nil {
		target = preemption.Input{Unit: *root.Leaf}
	}
	d.Kind, d.Reason, d.Plan, d.DropNomination, d.Err = preempt(ctx, snap, alloc, in, target)
	return d
}

// Leaf is the decision of one leaf of d: its unit, result and outcome, as
// a single leaf's decision has them, and the whole decision's kind,
// summary, plan and reasons.
func (d Decision) Leaf(n *placement.TreeNode) Decision {
	l := d
	l.Unit, l.Result = *n.Leaf, d.Tree.Leaves[n]
	l.Outcome = placement.Judge(l.Unit, l.Result)
	return l
}

// Leaves are the leaves of the decision's tree, in tree order (none for a
// unit that waits before placement).
func (d Decision) Leaves() []*placement.TreeNode {
	var out []*placement.TreeNode
	if d.Root != nil {
		d.Root.Walk(func(n *placement.TreeNode) {
			if n.Leaf != nil {
				out = append(out, n)
			}
		})
	}
	return out
}

// Assignments are every leaf's assignments.
func (d Decision) Assignments() []placement.Assignment { return d.Tree.Assignments() }

// preempt searches what a unit (or tree) that does not fit may preempt:
// target names it, in gives the candidates. Unschedulable with a reason
// when preemption is not considered or cannot help.
func preempt(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, in Input, target preemption.Input) (Kind, string, *preemption.Plan, bool, error) {
	if in.Preemption == nil {
		return Unschedulable, "", nil, false, nil
	}
	p, err := in.Preemption()
	switch {
	case err != nil:
		return Error, "", nil, false, fmt.Errorf("preemption candidates: %w", err)
	case p == nil:
		return Unschedulable, "", nil, false, nil
	case p.InProgress != "":
		return Preempt, p.InProgress, nil, false, nil
	case p.Delayed != "":
		return Unschedulable, p.Delayed, nil, p.Expired, nil
	}
	target.Priority, target.Candidates, target.PDBs, target.Stuck, target.Now, target.ShortWait = in.Priority, p.Candidates, p.PDBs, p.Stuck, p.Now, p.ShortWait
	plan, why, err := preemption.Find(ctx, snap, alloc, target)
	switch {
	case err != nil:
		return Error, "", nil, p.Expired, fmt.Errorf("preemption search: %w", err)
	case plan == nil:
		return Unschedulable, "preemption cannot help: " + why, nil, p.Expired, nil
	}
	return Preempt, "", plan, p.Expired, nil
}

// Topology is a group's constraint: its required keys
// (spec.schedulingConstraints.topology), its preferred ones and its device
// attribute (annotations); none for a lone pod.
func Topology(pg *lockv1.PodGroup) topology.Constraint {
	return topology.Constraint{
		Required:        podgroup.TopologyKeys(pg),
		Preferred:       podgroup.PreferredTopology(pg),
		DeviceAttribute: podgroup.DeviceTopology(pg),
	}
}

// Running is where a unit's placed members run: their nodes, and the
// devices their claims hold in snap.
func Running(snap *snapshot.Snapshot, placed []podgroup.Placed) []topology.Placed {
	out := make([]topology.Placed, 0, len(placed))
	for _, pl := range placed {
		r := topology.Placed{Node: pl.Node}
		for _, name := range snapshot.PodClaimNames(pl.Pod) {
			if c := snap.Claims[types.NamespacedName{Namespace: pl.Pod.Namespace, Name: name}]; c != nil && c.Status.Allocation != nil {
				r.Devices = append(r.Devices, c.Status.Allocation.Devices.Results...)
			}
		}
		out = append(out, r)
	}
	return out
}

// Members resolves each pending pod's claims against snap; the second
// result says what the unit waits for when a claim does not exist yet.
func Members(snap *snapshot.Snapshot, u *podgroup.Unit) ([]placement.Member, string) {
	out := make([]placement.Member, 0, len(u.Pending))
	for _, p := range u.Pending {
		m := placement.Member{Pod: p}
		for _, pc := range p.Spec.ResourceClaims {
			name, ok := snapshot.ClaimName(p, pc)
			if !ok {
				return nil, fmt.Sprintf("pod %s: waiting for the ResourceClaim of %q to be created from its template", p.Name, pc.Name)
			}
			key := types.NamespacedName{Namespace: p.Namespace, Name: name}
			if snap.Claims[key] == nil {
				return nil, fmt.Sprintf("pod %s: waiting for ResourceClaim %s", p.Name, name)
			}
			m.Claims = append(m.Claims, key)
		}
		out = append(out, m)
	}
	return out, ""
}

// MissingClaim reports whether a decision's error is a claim that went
// missing during placement (the unit waits for it, as for any claim).
func (d Decision) MissingClaim() bool { return errors.Is(d.Err, placement.ErrMissingClaim) }
