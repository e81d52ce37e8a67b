package decide

import (
	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// node is t as placement sees it; missing says what a leaf waits for
// when one of its claims does not exist yet (named by its PodGroup under a
// composite).
func (d *Decision) node(snap *snapshot.Snapshot, t *podgroup.Tree) (*placement.TreeNode, string) {
	n := &placement.TreeNode{Name: t.Name()}
	d.Nodes[n] = t
	if u := t.Unit; u != nil {
		members, missing := Members(snap, u)
		if missing != "" {
			return nil, missing
		}
		n.Leaf = &placement.Unit{Members: members, Bound: u.Bound, MinCount: u.MinCount(), Gang: u.Gang(), Topology: Topology(u.Group), CapacityTypes: podgroup.GroupCapacityTypes(u.Group, podgroup.DefaultCapacityTypes),
			// The placement, and a preemption's feasibility and simulations
			// after it, group the same members by the same signatures.
			Signatures: placement.NewSignatures()}
		if !n.Leaf.Topology.IsZero() {
			n.Leaf.Running = Running(snap, u.Placed)
		}
		return n, ""
	}
	c := t.Composite
	n.Gang, n.MinGroupCount = podgroup.CompositeGang(c)
	n.Topology = compositeTopology(c)
	for _, child := range t.Children {
		cn, missing := d.node(snap, child)
		if missing != "" && child.Unit != nil {
			return nil, child.Name() + ": " + missing
		}
		if missing != "" {
			return nil, missing
		}
		n.Children = append(n.Children, cn)
		if cn.Leaf != nil {
			n.Running = append(n.Running, Running(snap, child.Unit.Placed)...)
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

// forbidsPreemption says who forbids the unit to preempt: a
// CompositePodGroup or PodGroup whose policy says Never, or a member pod
// whose PriorityClass does.
func forbidsPreemption(t *podgroup.Tree) string {
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
