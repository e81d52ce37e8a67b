package decide

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// treeSpec is a scheduling tree of a golden scenario: a CompositePodGroup
// (gang of minGroupCount, basic when 0) with its topology, composite
// children and leaf groups (each a pods shape with its own minCount).
// Parent names a parent CompositePodGroup that does not exist.
type treeSpec struct {
	MinGroupCount int32      `json:"minGroupCount"`
	Topology      []string   `json:"topology"`
	Preferred     []string   `json:"preferred"`
	Parent        string     `json:"parent"`
	Composites    []treeNode `json:"composites"`
	Groups        []pods     `json:"groups"`
}

// treeNode is a named inner node.
type treeNode struct {
	Name string `json:"name"`
	treeSpec
}

// composite builds one CompositePodGroup, created at minute i (children
// are tried in creation order).
func composite(name, parent string, s treeSpec, i int) *lockv1.CompositePodGroup {
	c := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(time.Duration(i) * time.Minute))}}
	if parent != "" {
		c.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	if s.MinGroupCount > 0 {
		c.Spec.SchedulingPolicy.Gang = &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: s.MinGroupCount}
	} else {
		c.Spec.SchedulingPolicy.Basic = &lockv1.CompositeBasicSchedulingPolicy{}
	}
	if len(s.Topology) > 0 {
		c.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
		for _, k := range s.Topology {
			c.Spec.SchedulingConstraints.Topology = append(c.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
		}
	}
	if len(s.Preferred) > 0 {
		c.Annotations = map[string]string{lockv1.PreferredTopologyAnnotation: strings.Join(s.Preferred, ",")}
	}
	return c
}

// tree decides a scheduling tree unit: its objects are built and added to
// the cache, the tree resolved (podgroup.RootOf, ResolveTree) and decided
// (Decide).
func (r *runner) tree(ud pods) {
	var composites []*lockv1.CompositePodGroup
	var groups []*lockv1.PodGroup
	var pods []*corev1.Pod
	var walk func(name, parent string, s treeSpec)
	n := 0
	walk = func(name, parent string, s treeSpec) {
		composites = append(composites, composite(name, parent, s, n))
		n++
		for _, c := range s.Composites {
			walk(c.Name, name, c.treeSpec)
		}
		for _, g := range s.Groups {
			ps, claims, pg := build(g)
			pg.Spec.ParentCompositePodGroupName = ptr.To(name)
			pg.CreationTimestamp = metav1.NewTime(time.Unix(1e9, 0).Add(time.Duration(n) * time.Minute))
			n++
			for _, p := range ps {
				p.Spec.Priority = ptr.To(ud.Priority)
			}
			r.groups[pg.Name], r.priorities[pg.Name] = pg, ud.Priority
			r.add(g, ps, claims)
			groups, pods = append(groups, pg), append(pods, ps...)
		}
	}
	walk(ud.Name, ud.Tree.Parent, *ud.Tree)
	get := func(name string) *lockv1.CompositePodGroup {
		for _, c := range composites {
			if c.Name == name {
				return c
			}
		}
		return nil
	}
	root, reason, why := podgroup.RootOf(ud.Name, get)
	if root == nil {
		fmt.Fprintf(&r.out, "%s: %s\n  reason: %s\n  waitReason: %s\n", ud.Name, Wait, why, reason)
		return
	}
	tu := podgroup.ResolveTree(root, composites, groups, pods, nil)
	snap := r.st.Snapshot(r.ctx, queue.GroupKey("ns", root.Name).String(), ud.Priority)
	before := fingerprint(snap)
	d := Decide(r.ctx, snap, r.st.CEL, Input{Unit: tu, Priority: ud.Priority, Preemption: r.preemption})
	describeTree(&r.out, ud.Name, d)
	if d.Kind != Bind {
		r.unchanged(ud.Name, d.Kind, before, snap)
		return
	}
	r.assume(d.Assignments())
}

// describeTree writes a tree decision: its kind, each node's verdict and
// domain, each leaf's assignments, the summary and reasons.
func describeTree(out *strings.Builder, name string, d Decision) {
	fmt.Fprintf(out, "%s: %s (tree)\n", name, d.Kind)
	if d.Root != nil && d.Kind != Wait {
		d.Root.Walk(func(n *placement.TreeNode) {
			v, ok := d.Tree.Verdicts[n]
			if !ok {
				return
			}
			what := fmt.Sprintf("counts %t", v.Counts)
			if n.Leaf == nil {
				what += fmt.Sprintf(", %d of %d groups", v.Counted, v.Of)
			}
			fmt.Fprintf(out, "  %s: %s in %s\n", n.Name, what, v.Domain)
		})
	}
	var lines []string
	var asgs []placement.Assignment
	if d.Kind == Bind {
		asgs = d.Assignments()
	}
	if d.Plan != nil {
		asgs = d.Plan.Placement.Assignments
		var victims []string
		for _, v := range d.Plan.Victims {
			for _, p := range v.Pods {
				victims = append(victims, p.Name)
			}
		}
		sort.Strings(victims)
		fmt.Fprintf(out, "  evict: %s\n", strings.Join(victims, " "))
	}
	for _, a := range asgs {
		var devs []string
		for _, c := range a.Claims {
			for _, r := range c.Status.Allocation.Devices.Results {
				devs = append(devs, r.Pool+"/"+r.Device)
			}
		}
		lines = append(lines, fmt.Sprintf("  %s → %s %s", a.Pod.Name, a.Node, strings.Join(devs, " ")))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(out, strings.TrimRight(l, " "))
	}
	for _, s := range []struct{ label, v string }{{"summary", d.Summary}, {"reason", d.Reason}, {"waitReason", d.WaitReason}} {
		if s.v != "" {
			fmt.Fprintf(out, "  %s: %s\n", s.label, s.v)
		}
	}
	if d.Err != nil {
		fmt.Fprintf(out, "  error: %v\n", d.Err)
	}
}
