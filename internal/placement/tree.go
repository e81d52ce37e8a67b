package placement

import (
	"context"
	"fmt"
	"strings"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// treeBudget bounds the leaf placements one tree's search may make: each
// is one placement of one PodGroup in one domain. Backtracking between
// siblings re-places them in other domains; the budget keeps a tree that
// does not fit from costing more than a few hundred gang placements.
const treeBudget = 256

// TreeNode is a scheduling tree as placement sees it: a CompositePodGroup
// and its children, down to leaves that are PodGroups' units.
type TreeNode struct {
	// Name names the node in messages ("CompositePodGroup ns/x").
	Name string
	// Leaf is a PodGroup's unit; nil for a composite.
	Leaf *Unit
	// Children of a composite, in the order they are tried (creation).
	Children []*TreeNode
	// Gang: at least MinGroupCount children must count for this one to;
	// otherwise (basic) the children are placed independently and it
	// counts when one of them does.
	Gang          bool
	MinGroupCount int
	// Topology of a composite's subtree; Running are the members placed
	// under it. A leaf's are its unit's.
	Topology topology.Constraint
	Running  []topology.Placed
}

// constraint is where n must and would rather run, and what runs under it.
func (n *TreeNode) constraint() (topology.Constraint, []topology.Placed) {
	if n.Leaf != nil {
		return n.Leaf.Topology, n.Leaf.Running
	}
	return n.Topology, n.Running
}

// Verdict is what the tree's best attempt says of one node.
type Verdict struct {
	// Counts: the node's minCount (leaf) or minGroupCount (composite) is
	// met, by its bound members and those placed.
	Counts bool
	// Counted and Of: for a composite, how many children counted, of how
	// many.
	Counted, Of int
	// Domain the node was placed (or last tried) in.
	Domain string
}

// TreeResult is what placing a tree gave.
type TreeResult struct {
	// Admitted: the root counts; Leaves' assignments bind.
	Admitted bool
	// Leaves are each leaf's result: its assignments when Admitted, else
	// what its best attempt placed and why the rest did not fit.
	Leaves map[*TreeNode]Result
	// Verdicts are each node's, from the attempt that got furthest.
	Verdicts map[*TreeNode]Verdict
	// Failed are, for a tree not admitted, each leaf's last attempt that
	// did not count (why it does not fit where it was tried).
	Failed map[*TreeNode]Result
	// SearchExhausted: the search ran out of budget before it found a
	// placement or proved there is none.
	SearchExhausted bool
}

// Assignments are every leaf's assignments.
func (r TreeResult) Assignments() []Assignment {
	var out []Assignment
	for _, res := range r.Leaves {
		out = append(out, res.Assignments...)
	}
	return out
}

// PlaceTree places a scheduling tree all or nothing, top-down: each node
// inside its parent's domain (its own topology's domains within it), a
// composite gang counting when MinGroupCount of its children do, a leaf
// when its minCount is met. Siblings are searched with backtracking —
// a child is moved to its next domain when a later sibling does not fit —
// within treeBudget leaf placements, so a tree that fits is found even
// where placing the children greedily in order is not. An admitted tree
// stays assumed in snap; one that is not leaves snap as it found it.
func PlaceTree(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, root *TreeNode) (TreeResult, error) {
	return placeTree(ctx, snap, alloc, root, false)
}

// SimulateTree answers what PlaceTree would do, leaving snap as it found
// it (a preemption's what-if).
func SimulateTree(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, root *TreeNode) (TreeResult, error) {
	return placeTree(ctx, snap, alloc, root, true)
}

func placeTree(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, root *TreeNode, dry bool) (TreeResult, error) {
	if root.Leaf != nil {
		return placeLeaf(ctx, snap, alloc, root, dry)
	}
	p := &treePlacer{ctx: ctx, snap: snap, alloc: alloc, j: &journal{}, budget: treeBudget,
		leaves: map[*TreeNode]Result{}, verdicts: map[*TreeNode]Verdict{}, failed: map[*TreeNode]Result{},
		most: map[*TreeNode]Verdict{},
		best: TreeResult{Leaves: map[*TreeNode]Result{}, Verdicts: map[*TreeNode]Verdict{}}}
	whole := topology.Domain{Nodes: snap.Nodes}
	ok := p.place(root, &whole, func() bool { return true })
	if p.err != nil {
		p.j.rewind(0)
		return TreeResult{}, p.err
	}
	if !ok {
		p.j.rewind(0)
		p.best.SearchExhausted = p.budget <= 0
		p.best.Failed = p.failed
		// A composite the best path had not judged yet says the most
		// of its children it ever counted.
		for n, v := range p.most {
			if _, ok := p.best.Verdicts[n]; !ok {
				p.best.Verdicts[n] = v
			}
		}
		return p.best, nil
	}
	res := TreeResult{Admitted: true, Leaves: p.leaves, Verdicts: p.verdicts}
	if dry {
		p.j.rewind(0)
	}
	return res, nil
}

// placeLeaf places a tree that is one leaf — a flat PodGroup, or a lone
// pod — exactly as Place does: in its own topology's domains over the
// whole cluster (there is no parent domain to stay in), admitted when
// Judge says so.
func placeLeaf(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, root *TreeNode, dry bool) (TreeResult, error) {
	res, err := place(ctx, snap, alloc, *root.Leaf, dry, nil)
	if err != nil {
		return TreeResult{}, err
	}
	admitted := Judge(*root.Leaf, res).Admitted
	out := TreeResult{Admitted: admitted, Leaves: map[*TreeNode]Result{root: res},
		Verdicts:        map[*TreeNode]Verdict{root: {Counts: admitted, Domain: res.Domain}},
		SearchExhausted: !admitted && res.SearchExhausted}
	if !admitted {
		out.Failed = map[*TreeNode]Result{root: res}
	}
	return out, nil
}

// treePlacer is one tree's search. leaves and verdicts are the current
// path's; best is the furthest attempt's (for messages).
type treePlacer struct {
	ctx      context.Context
	snap     *snapshot.Snapshot
	alloc    *dra.Allocator
	j        *journal
	budget   int
	err      error
	leaves   map[*TreeNode]Result
	verdicts map[*TreeNode]Verdict
	best     TreeResult
	failed   map[*TreeNode]Result
	// most is, per composite, the verdict with the most children counted.
	most map[*TreeNode]Verdict
	// bestScore is how far best got: children counted at every level.
	bestScore int
}

// place tries the ways n can be placed inside parent — each domain of its
// own topology there, and for a composite each way its children fit —
// and calls k with n placed (and counting); it returns true, keeping the
// placement, when k does. Otherwise all it placed is rewound.
func (p *treePlacer) place(n *TreeNode, parent *topology.Domain, k func() bool) bool {
	c, running := n.constraint()
	plan := topology.PlanWithin(parent, c, running)
	domains := plan.Domains
	for _, d := range domains {
		if p.budget <= 0 || p.err != nil {
			return false
		}
		d := d
		mark := p.j.mark()
		if n.Leaf != nil {
			if p.leaf(n, &d) && k() {
				return true
			}
		} else if p.children(n, &d, 0, 0, k) {
			return true
		}
		p.j.rewind(mark)
		p.forget(n)
	}
	return false
}

// forget drops the path's records of n's subtree (its placement was
// rewound).
func (p *treePlacer) forget(n *TreeNode) {
	n.Walk(func(m *TreeNode) {
		delete(p.leaves, m)
		delete(p.verdicts, m)
	})
}

// leaf places a leaf's pending members in d and reports whether it counts.
func (p *treePlacer) leaf(n *TreeNode, d *topology.Domain) bool {
	u := *n.Leaf
	u.Domains = []topology.Domain{*d}
	var res Result
	if len(u.Members) > 0 {
		p.budget--
		var err error
		if res, err = place(p.ctx, p.snap, p.alloc, u, false, p.j); err != nil {
			p.err = err
			return false
		}
	}
	o := Judge(u, res)
	// A gang leaf counts when what it placed admits it, or when its bound
	// members already do (a running group; what it placed then joins). A
	// basic leaf has no minimum: it counts with what fits, even nothing
	// (a Ray worker group of minReplicas 0 beside its required head).
	counts := o.Admitted || u.Gang && u.Bound >= u.MinCount || !u.Gang
	p.leaves[n] = res
	p.verdicts[n] = Verdict{Counts: counts, Domain: d.String()}
	if !counts {
		p.failed[n] = res
	}
	p.score()
	return counts
}

// children places composite n's children i.. inside d, count of the
// earlier ones counting, then calls k once n counts. A child is placed if
// it can be (then the next, backtracking into its other placements when
// the rest cannot follow), else left out while enough remain.
func (p *treePlacer) children(n *TreeNode, d *topology.Domain, i, count int, k func() bool) bool {
	need := 1
	if n.Gang {
		need = n.MinGroupCount
	}
	if i == len(n.Children) {
		counts := count >= need
		p.judge(n, Verdict{Counts: counts, Counted: count, Of: len(n.Children), Domain: d.String()})
		return counts && k()
	}
	if count+len(n.Children)-i < need {
		p.judge(n, Verdict{Counted: count, Of: len(n.Children), Domain: d.String()})
		return false
	}
	c := n.Children[i]
	if p.place(c, d, func() bool { return p.children(n, d, i+1, count+1, k) }) {
		return true
	}
	if p.err != nil {
		return false
	}
	return p.children(n, d, i+1, count, k)
}

// judge records composite n's verdict on the path.
func (p *treePlacer) judge(n *TreeNode, v Verdict) {
	p.verdicts[n] = v
	if m, ok := p.most[n]; !ok || v.Counted > m.Counted {
		p.most[n] = v
	}
	p.score()
}

// score keeps the path as best when it counts more nodes than best did.
func (p *treePlacer) score() {
	s := 0
	for _, v := range p.verdicts {
		if v.Counts {
			s += 2
		}
		s += v.Counted
	}
	for _, r := range p.leaves {
		s += r.Placeable
	}
	if s < p.bestScore && len(p.best.Verdicts) > 0 {
		return
	}
	p.bestScore = s
	p.best.Leaves = make(map[*TreeNode]Result, len(p.leaves))
	for n, r := range p.leaves {
		p.best.Leaves[n] = r
	}
	p.best.Verdicts = make(map[*TreeNode]Verdict, len(p.verdicts))
	for n, v := range p.verdicts {
		p.best.Verdicts[n] = v
	}
}

// Walk calls f for n and every node under it, parents first.
func (n *TreeNode) Walk(f func(*TreeNode)) {
	f(n)
	for _, c := range n.Children {
		c.Walk(f)
	}
}

// TreeSummary says why a tree that is not admitted does not fit, from its
// best attempt: each composite that did not count, with how many of its
// children did and where, and the first leaf's reason, e.g.
// "CompositePodGroup ml/job: 1 of 2 groups fit (minGroupCount 2) in zone=z1; PodGroup ml/w1: minCount 8 not satisfiable: …".
func TreeSummary(ctx context.Context, snap *snapshot.Snapshot, res TreeResult, root *TreeNode, summary func(*TreeNode, Result) string) string {
	var parts []string
	root.Walk(func(n *TreeNode) {
		v, seen := res.Verdicts[n]
		failed, tried := res.Failed[n]
		switch {
		case seen && v.Counts:
		case !seen && n.Leaf != nil && tried:
			parts = append(parts, fmt.Sprintf("%s: %s", n.Name, summary(n, failed)))
		case !seen:
		case n.Leaf == nil:
			parts = append(parts, fmt.Sprintf("%s: %d of %d groups fit (minGroupCount %d) in %s", n.Name, v.Counted, v.Of, max(n.MinGroupCount, 1), v.Domain))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s", n.Name, summary(n, res.Leaves[n])))
		}
	})
	if res.SearchExhausted {
		parts = append([]string{"no placement of the tree found within the search budget; one may exist"}, parts...)
	}
	if len(parts) == 0 {
		return unreachedSummary(snap, root)
	}
	return strings.Join(parts, "; ")
}

// unreachedSummary says why a tree none of whose nodes was reached does
// not fit: a required topology key no node carries (no domain to try), or
// that no domain of the root's topology was found.
func unreachedSummary(snap *snapshot.Snapshot, root *TreeNode) string {
	var missing []string
	root.Walk(func(n *TreeNode) {
		t := n.Topology
		if n.Leaf != nil {
			t = n.Leaf.Topology
		}
		for _, key := range t.Required {
			carried := false
			for _, ni := range snap.Nodes {
				if _, ok := ni.Node.Labels[key]; ok {
					carried = true
					break
				}
			}
			if !carried {
				missing = append(missing, fmt.Sprintf("%s requires topology key %s, which no node carries", n.Name, key))
			}
		}
	})
	if len(missing) > 0 {
		return strings.Join(missing, "; ") + ": no domain can hold the tree; label the nodes, or remove the constraint"
	}
	return fmt.Sprintf("%s: no topology domain (%s) holds the tree", root.Name, root.Topology)
}
