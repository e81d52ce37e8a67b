package decide

import (
	"context"

	"k8s.io/dynamic-resource-allocation/cel"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// TreeInput is what a tree's decision reads besides the snapshot.
type TreeInput struct {
	Tree *podgroup.TreeUnit
	// Priority is the tree's (its members' lowest).
	Priority int32
	// Preemption, as Input's.
	Preemption func() (*Preemption, error)
}

// TreeDecision is what one cycle decided for a scheduling tree.
type TreeDecision struct {
	Kind Kind
	// Root is the tree as placement saw it; Units maps its leaves back to
	// their PodGroups' units (and Nodes its nodes back to the tree's).
	Root  *placement.TreeNode
	Units map[*placement.TreeNode]*podgroup.Unit
	Nodes map[*placement.TreeNode]*podgroup.Tree
	// Result is what placement gave: each leaf's result, each node's
	// verdict.
	Result placement.TreeResult
	// Summary says why the tree is not admitted ("" when it is).
	Summary string
	Plan    *preemption.Plan
	// Reason and WaitReason as Decision's.
	Reason, WaitReason string
	Err                error
	// DropNomination as Decision's.
	DropNomination bool
}

// Leaf is the Decision of one leaf of a tree decision: its unit, result
// and outcome, as a flat group's decision would have them.
func (d TreeDecision) Leaf(n *placement.TreeNode) Decision {
	res := d.Result.Leaves[n]
	return Decision{Kind: d.Kind, Unit: *n.Leaf, Result: res, Outcome: placement.Judge(*n.Leaf, res), Summary: d.Summary, Plan: d.Plan, Reason: d.Reason, DropNomination: d.DropNomination}
}

// DecideTree decides one scheduling tree on snap, all or nothing at its
// root (placement.PlaceTree): an admitted tree stays placed in snap (the
// caller assumes it), one that is not leaves snap as it found it, and is
// offered preemption as a whole.
func DecideTree(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, in TreeInput) TreeDecision {
	t := in.Tree
	if t.Waiting != "" {
		return TreeDecision{Kind: Wait, Reason: t.Waiting, WaitReason: t.WaitReason}
	}
	d := TreeDecision{Units: map[*placement.TreeNode]*podgroup.Unit{}, Nodes: map[*placement.TreeNode]*podgroup.Tree{}}
	root, missing := d.node(snap, t.Root)
	if missing != "" {
		return TreeDecision{Kind: Wait, Reason: missing}
	}
	d.Root = root
	res, err := placement.PlaceTree(ctx, snap, dra.New(snap, cache), root)
	if err != nil {
		d.Kind, d.Err = Error, err
		return d
	}
	d.Result = res
	if res.Admitted {
		d.Kind = Bind
		return d
	}
	d.Summary = placement.TreeSummary(ctx, snap, res, root, func(n *placement.TreeNode, r placement.Result) string {
		return placement.Summary(ctx, snap, cache, placement.Judge(*n.Leaf, r))
	})
	d.Kind = Unschedulable
	if who := treeForbidsPreemption(t.Root); who != "" {
		d.Reason = "preemptionPolicy Never (" + who + "): no preemption"
		return d
	}
	d.Kind, d.Reason, d.Plan, d.DropNomination, d.Err = preempt(ctx, snap, cache, Input{Priority: in.Priority, Preemption: in.Preemption}, preemption.Input{Tree: root})
	return d
}

// node is t as placement sees it; missing says what a leaf waits for
// when one of its claims does not exist yet.
func (d *TreeDecision) node(snap *snapshot.Snapshot, t *podgroup.Tree) (*placement.TreeNode, string) {
	n := &placement.TreeNode{Name: t.Name()}
	d.Nodes[n] = t
	if u := t.Unit; u != nil {
		members, missing := Members(snap, u)
		if missing != "" {
			return nil, t.Name() + ": " + missing
		}
		n.Leaf = &placement.Unit{Members: members, Bound: u.Bound, MinCount: u.MinCount(), Gang: u.Gang(), Topology: Topology(u.Group), CapacityTypes: podgroup.GroupCapacityTypes(u.Group, podgroup.DefaultCapacityTypes), Running: Running(snap, u.Placed)}
		d.Units[n] = u
		return n, ""
	}
	c := t.Composite
	n.Gang, n.MinGroupCount = podgroup.CompositeGang(c)
	n.Topology = compositeTopology(c)
	for _, child := range t.Children {
		cn, missing := d.node(snap, child)
		if missing != "" {
			return nil, missing
		}
		n.Children = append(n.Children, cn)
		if cn.Leaf != nil {
			n.Running = append(n.Running, Running(snap, d.Units[cn].Placed)...)
		} else {
			n.Running = append(n.Running, cn.Running...)
		}
	}
	return n, ""
}

// compositeTopology is a CompositePodGroup's constraint: its required
// keys and, as for PodGroups, the preferred keys and device attribute of
// its annotations.
func compositeTopology(c *lockv1.CompositePodGroup) topology.Constraint {
	pg := &lockv1.PodGroup{ObjectMeta: c.ObjectMeta}
	pg.Spec.SchedulingConstraints = c.Spec.SchedulingConstraints
	return Topology(pg)
}

// treeForbidsPreemption says who forbids the tree to preempt: a
// CompositePodGroup or PodGroup whose policy says Never, or a member pod
// whose PriorityClass does.
func treeForbidsPreemption(t *podgroup.Tree) string {
	who := ""
	t.Walk(func(n *podgroup.Tree) {
		if who != "" {
			return
		}
		if c := n.Composite; c != nil && c.Spec.PreemptionPolicy != nil && *c.Spec.PreemptionPolicy == lockv1.PreemptNever {
			who = n.Name()
		}
		if u := n.Unit; u != nil {
			who = preemption.Forbidden(u.Group, u.Pending)
		}
	})
	return who
}
