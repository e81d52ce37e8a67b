package podgroup

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Tree is a scheduling tree resolved against its objects: a
// CompositePodGroup with its children, down to the PodGroups under it,
// each resolved with its pods (Resolve).
type Tree struct {
	// Composite is set for an inner node, Unit for a leaf (a PodGroup).
	Composite *lockv1.CompositePodGroup
	Unit      *Unit
	Children  []*Tree
}

// Name is how messages name the node: "CompositePodGroup ns/name",
// "PodGroup ns/name", or for a lone pod "pod ns/name".
func (t *Tree) Name() string {
	switch {
	case t.Composite != nil:
		return "CompositePodGroup " + t.Composite.Namespace + "/" + t.Composite.Name
	case t.Unit.Group != nil:
		return "PodGroup " + t.Unit.Group.Namespace + "/" + t.Unit.Group.Name
	case len(t.Unit.Pods) > 0:
		return "pod " + t.Unit.Pods[0].Namespace + "/" + t.Unit.Pods[0].Name
	}
	return "pod"
}

// Walk calls f for t and every node under it, parents first.
func (t *Tree) Walk(f func(*Tree)) {
	f(t)
	for _, c := range t.Children {
		c.Walk(f)
	}
}

// BoundWhole reports whether the tree's bound members meet every gang
// need on their own — each leaf at least its minCount (and one pod), each
// composite at least minGroupCount such children (one for a basic one) —
// and, for a composite, how many of its children do (counted of of).
func (t *Tree) BoundWhole() (ok bool, counted, of int) {
	if u := t.Unit; u != nil {
		return u.Bound > 0 && u.Bound >= u.MinCount(), 0, 0
	}
	for _, c := range t.Children {
		if whole, _, _ := c.BoundWhole(); whole {
			counted++
		}
	}
	need := 1
	if gang, n := CompositeGang(t.Composite); gang {
		need = max(int(n), 1)
	}
	return counted >= need, counted, len(t.Children)
}

// Leaves are the tree's PodGroups' units.
func (t *Tree) Leaves() []*Unit {
	var out []*Unit
	t.Walk(func(n *Tree) {
		if n.Unit != nil {
			out = append(out, n.Unit)
		}
	})
	return out
}

// Pending counts the members to place now, in every leaf.
func (t *Tree) Pending() int {
	n := 0
	for _, u := range t.Leaves() {
		n += len(u.Pending)
	}
	return n
}

// TreeUnit is what the scheduler places for a tree: its root, and why it
// cannot be attempted, if it cannot.
type TreeUnit struct {
	Root *Tree
	// Waiting explains why the tree waits ("" if it can be attempted);
	// WaitReason is the condition reason for it.
	Waiting, WaitReason string
}

// Single is a flat unit — a PodGroup outside any tree, or a lone pod — as
// the tree it is: one leaf, waiting when the unit does.
func Single(u *Unit) *TreeUnit {
	return &TreeUnit{Root: &Tree{Unit: u}, Waiting: u.Waiting, WaitReason: u.WaitReason}
}

// Flat is the unit of a tree that is one leaf; nil for a tree of
// CompositePodGroups.
func (t *TreeUnit) Flat() *Unit {
	if t.Root.Composite != nil {
		return nil
	}
	return t.Root.Unit
}

// CompositeGang reports whether a CompositePodGroup admits its children
// all or nothing, and how many of them.
func CompositeGang(c *lockv1.CompositePodGroup) (bool, int) {
	if g := c.Spec.SchedulingPolicy.Gang; g != nil {
		return true, int(g.MinGroupCount)
	}
	return false, 1
}

// CompositeDisruptAll reports whether a CompositePodGroup's subtree is
// disrupted whole (all, Lockstep's default; upstream defaults to single).
func CompositeDisruptAll(c *lockv1.CompositePodGroup) bool {
	return c.Spec.DisruptionMode == nil || c.Spec.DisruptionMode.Single == nil
}

// ParentOf is the name of the CompositePodGroup a PodGroup's tree node
// hangs under ("" for a group that is no tree's).
func ParentOf(pg *lockv1.PodGroup) string {
	if pg == nil || pg.Spec.ParentCompositePodGroupName == nil {
		return ""
	}
	return *pg.Spec.ParentCompositePodGroupName
}

// CompositeParent is a CompositePodGroup's parent's name ("" for a root).
func CompositeParent(c *lockv1.CompositePodGroup) string {
	if c.Spec.ParentCompositePodGroupName == nil {
		return ""
	}
	return *c.Spec.ParentCompositePodGroupName
}

// RootOf walks from the CompositePodGroup named parent up to its tree's
// root, through get (nil when none of that name exists). It returns the
// root, or why there is none: a missing parent (the group waits for it,
// never scheduled alone), a cycle, a tree deeper than MaxTreeDepth.
func RootOf(parent string, get func(name string) *lockv1.CompositePodGroup) (*lockv1.CompositePodGroup, string, string) {
	seen := map[string]bool{}
	name := parent
	for depth := 1; ; depth++ {
		c := get(name)
		if c == nil {
			return nil, lockv1.CompositeReasonWaitingForParent, fmt.Sprintf("waiting for CompositePodGroup %s, its parent, which does not exist: a group of a tree is never scheduled on its own", name)
		}
		if seen[name] {
			return nil, lockv1.CompositeReasonInvalid, fmt.Sprintf("CompositePodGroup %s is its own ancestor: a tree cannot be a cycle", name)
		}
		if depth > lockv1.MaxTreeDepth {
			return nil, lockv1.CompositeReasonInvalid, fmt.Sprintf("the tree above CompositePodGroup %s is deeper than %d levels", parent, lockv1.MaxTreeDepth)
		}
		seen[name] = true
		p := CompositeParent(c)
		if p == "" {
			return c, "", ""
		}
		name = p
	}
}

// ResolveTree resolves the tree rooted at root from its namespace's
// CompositePodGroups, PodGroups and the pods that name them (candidates,
// as for Resolve). Children are ordered by creation, then name (the order
// they are tried in). A tree deeper than MaxTreeDepth, or with a node of
// more than MaxChildren children, or with no PodGroup under it, waits.
func ResolveTree(root *lockv1.CompositePodGroup, composites []*lockv1.CompositePodGroup, groups []*lockv1.PodGroup, pods []*corev1.Pod, assumed Assumed, opts ...Option) *TreeUnit {
	childComposites := map[string][]*lockv1.CompositePodGroup{}
	for _, c := range composites {
		if p := CompositeParent(c); p != "" && c.Namespace == root.Namespace {
			childComposites[p] = append(childComposites[p], c)
		}
	}
	childGroups := map[string][]*lockv1.PodGroup{}
	for _, g := range groups {
		if p := ParentOf(g); p != "" && g.Namespace == root.Namespace {
			childGroups[p] = append(childGroups[p], g)
		}
	}
	byGroup := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if g := GroupOf(p); g != "" && p.Namespace == root.Namespace {
			byGroup[g] = append(byGroup[g], p)
		}
	}
	tu := &TreeUnit{}
	var build func(c *lockv1.CompositePodGroup, depth int) *Tree
	build = func(c *lockv1.CompositePodGroup, depth int) *Tree {
		t := &Tree{Composite: c}
		if depth > lockv1.MaxTreeDepth && tu.Waiting == "" {
			tu.WaitReason, tu.Waiting = lockv1.CompositeReasonInvalid, fmt.Sprintf("the tree is deeper than %d levels at CompositePodGroup %s", lockv1.MaxTreeDepth, c.Name)
			return t
		}
		kids := childComposites[c.Name]
		sortComposites(kids)
		for _, k := range kids {
			t.Children = append(t.Children, build(k, depth+1))
		}
		leaves := childGroups[c.Name]
		sortGroups(leaves)
		for _, g := range leaves {
			t.Children = append(t.Children, &Tree{Unit: Resolve(g, g.Namespace, g.Name, byGroup[g.Name], assumed, opts...)})
		}
		if n := len(t.Children); n > lockv1.MaxChildren && tu.Waiting == "" {
			tu.WaitReason, tu.Waiting = lockv1.CompositeReasonInvalid, fmt.Sprintf("CompositePodGroup %s has %d children, more than %d", c.Name, n, lockv1.MaxChildren)
		}
		return t
	}
	tu.Root = build(root, 1)
	if tu.Waiting == "" {
		tu.Waiting, tu.WaitReason = treeWaiting(tu.Root)
	}
	return tu
}

// treeWaiting is why a tree cannot be attempted yet: it has no PodGroup,
// or a gang composite cannot reach minGroupCount with the children that
// can be attempted (each leaf that waits — for pods, gates — counts out).
func treeWaiting(t *Tree) (string, string) {
	if len(t.Leaves()) == 0 {
		return fmt.Sprintf("%s has no PodGroup under it yet; none is placed until its groups and their pods exist", t.Name()), lockv1.PodGroupReasonWaitingForPods
	}
	why, reason := "", ""
	var ready func(n *Tree) bool
	ready = func(n *Tree) bool {
		if n.Unit != nil {
			if n.Unit.Waiting != "" && why == "" {
				why, reason = fmt.Sprintf("%s: %s", n.Name(), n.Unit.Waiting), n.Unit.WaitReason
			}
			return n.Unit.Waiting == ""
		}
		gang, need := CompositeGang(n.Composite)
		if !gang {
			need = 1
		}
		count := 0
		for _, c := range n.Children {
			if ready(c) {
				count++
			}
		}
		if count < need && why == "" {
			// No child waits: the composite has too few of them.
			why = fmt.Sprintf("%s has %d of minGroupCount %d groups; none is placed until %d exist", n.Name(), count, need, need)
		}
		return count >= need
	}
	if ready(t) {
		return "", ""
	}
	if reason == "" {
		reason = lockv1.PodGroupReasonWaitingForPods
	}
	return "waiting for the tree's groups: " + why, reason
}

func sortComposites(cs []*lockv1.CompositePodGroup) {
	sort.Slice(cs, func(i, j int) bool {
		if !cs[i].CreationTimestamp.Equal(&cs[j].CreationTimestamp) {
			return cs[i].CreationTimestamp.Before(&cs[j].CreationTimestamp)
		}
		return cs[i].Name < cs[j].Name
	})
}

func sortGroups(gs []*lockv1.PodGroup) {
	sort.Slice(gs, func(i, j int) bool {
		if !gs[i].CreationTimestamp.Equal(&gs[j].CreationTimestamp) {
			return gs[i].CreationTimestamp.Before(&gs[j].CreationTimestamp)
		}
		return gs[i].Name < gs[j].Name
	})
}
