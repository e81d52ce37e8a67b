package explain

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// TreeReport is the answer for a scheduling tree and its nodes' verdicts.
type TreeReport struct {
	// Answer comes first: one sentence, with the root's arithmetic when
	// the tree does not fit.
	Answer string `json:"answer"`
	// Tree is the root, e.g. "CompositePodGroup ml/job"; Asked the node
	// asked about when it is not the root.
	Tree  string `json:"tree"`
	Asked string `json:"asked,omitempty"`
	// Condition is the root's CompositePodGroupInitiallyScheduled.
	Condition *metav1.Condition `json:"condition,omitempty"`
	// Root is the tree, each node with the decision's verdict (nil when the
	// tree waits before placement).
	Root *TreeNodeReport `json:"root,omitempty"`
	// Preemption is what the preemption search concludes for the tree.
	Preemption string   `json:"preemption,omitempty"`
	Notes      []string `json:"notes,omitempty"`
}

// TreeNodeReport is one node of a tree and what the decision says of it.
type TreeNodeReport struct {
	// Name is e.g. "PodGroup ml/w0".
	Name string `json:"name"`
	// Policy is e.g. "gang, minGroupCount 2", "gang, minCount 8", "basic".
	Policy   string   `json:"policy"`
	Topology []string `json:"topology,omitempty"`
	// Members, Bound and Pending of a leaf, as the scheduler counts them.
	Members int `json:"members,omitempty"`
	Bound   int `json:"bound,omitempty"`
	Pending int `json:"pending,omitempty"`
	// Verdict: whether the node counts in the tree's best attempt, and
	// where ("not reached" when the search never placed it, "not
	// attempted: the tree waits", "bound" when nothing is pending).
	Verdict  string            `json:"verdict"`
	Children []*TreeNodeReport `json:"children,omitempty"`
}

// RunTree explains the scheduling tree the CompositePodGroup ns/name is
// part of: the scheduler's own decision for its root (decide.Decide on
// the view the scheduler's cycle builds), each node's verdict and the
// root's arithmetic.
func RunTree(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, ns, name string) (*TreeReport, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the watch load started
	st, err := load(ctx, client, dyn)
	if err != nil {
		return nil, err
	}
	composites := st.compositesIn(ns)
	found := false
	for _, c := range composites {
		found = found || c.Name == name
	}
	if !found {
		return nil, fmt.Errorf("CompositePodGroup %s/%s not found: `lockstep get compositepodgroups -n %s` lists those there are", ns, name, ns)
	}
	tr := st.decideTree(ctx, composites, ns, name)
	r := &TreeReport{Tree: tr.label, Notes: st.notes, Answer: tr.answer}
	if tr.root == nil {
		return r, nil
	}
	if tr.root.Name != name {
		r.Asked = "CompositePodGroup " + ns + "/" + name
	}
	r.Condition = meta.FindStatusCondition(tr.root.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled)
	r.Root = tr.report
	if tr.decided && (tr.d.Kind == decide.Unschedulable || tr.d.Kind == decide.Preempt) {
		r.Preemption = preemptionNote(tr.d)
	}
	return r, nil
}

// treeRun is the scheduler's decision for the tree a CompositePodGroup is
// part of, as explain reports it: for `explain compositepodgroup` and for
// any other target whose group hangs in a tree — the scheduler never
// decides a tree's group alone, so neither does explain.
type treeRun struct {
	// label names the root ("CompositePodGroup ns/root"), or the node
	// asked about when it has no root; root is nil then.
	label string
	root  *lockv1.CompositePodGroup
	tu    *podgroup.TreeUnit
	// decided: d is the tree's decision (false when nothing is pending or
	// there is no root).
	decided bool
	d       decide.Decision
	answer  string
	report  *TreeNodeReport
}

// decideTree decides the tree of CompositePodGroup ns/name (one of
// composites) as the scheduler does: from its root, over every group of
// the namespace that names a parent.
func (st *state) decideTree(ctx context.Context, composites []*lockv1.CompositePodGroup, ns, name string) treeRun {
	byName := map[string]*lockv1.CompositePodGroup{}
	var inNS []*lockv1.CompositePodGroup
	for _, c := range composites {
		if c.Namespace == ns {
			byName[c.Name] = c
			inNS = append(inNS, c)
		}
	}
	root, _, why := podgroup.RootOf(name, func(n string) *lockv1.CompositePodGroup { return byName[n] })
	if root == nil {
		label := "CompositePodGroup " + ns + "/" + name
		return treeRun{label: label, answer: fmt.Sprintf("%s is not scheduled: %s", label, why)}
	}
	tr := treeRun{label: "CompositePodGroup " + ns + "/" + root.Name, root: root}
	var groups []*lockv1.PodGroup
	for _, g := range st.groups {
		if g.Namespace == ns && podgroup.ParentOf(g) != "" {
			groups = append(groups, g)
		}
	}
	tr.tu = podgroup.ResolveTree(root, inNS, groups, st.pods, nil, podgroup.WithClusterQueues(st.clusterQueueOf))
	var pods []*corev1.Pod
	for _, u := range tr.tu.Root.Leaves() {
		pods = append(pods, u.Pods...)
	}
	prio, _ := podgroup.Priority(pods)
	if tr.tu.Waiting == "" && tr.tu.Root.Pending() == 0 {
		tr.answer = fmt.Sprintf("%s is not pending: every member of its groups is bound", tr.label)
		tr.report = nodeReport(tr.tu.Root, nil, nil, "bound")
		return tr
	}
	key := queue.TreeKey(ns, root.Name).String()
	tr.decided = true
	tr.d = st.decide(ctx, key, tr.tu, prio)
	unplaced := "not reached" // by the search: an earlier sibling or level failed
	if tr.d.Kind == decide.Wait {
		unplaced = "not attempted: the tree waits"
	}
	tr.report = nodeReport(tr.tu.Root, byTree(tr.d), tr.d.Tree.Verdicts, unplaced)
	tr.answer = treeAnswer(tr.label, tr.d)
	return tr
}

// compositesIn are the CompositePodGroups of ns that load read, sorted by
// name (podgroup.ResolveTree orders children itself): explain lists them
// once.
func (st *state) compositesIn(ns string) []*lockv1.CompositePodGroup {
	var out []*lockv1.CompositePodGroup
	for _, c := range st.composites {
		if c.Namespace == ns {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// leaf is the placement node of PodGroup name in the decision, nil when
// the decision has none (the tree waits before placement).
func (tr treeRun) leaf(name string) *placement.TreeNode {
	for n, t := range tr.d.Nodes {
		if t.Unit != nil && t.Unit.Group != nil && t.Unit.Group.Name == name {
			return n
		}
	}
	return nil
}

// listComposites are the CompositePodGroups of ns ("": every namespace),
// in-tree ones first so that a Lockstep one of the same name wins, as in
// the scheduler.
func listComposites(ctx context.Context, dyn dynamic.Interface, ns string) []*lockv1.CompositePodGroup {
	byName := map[string]*lockv1.CompositePodGroup{}
	var order []string
	for _, gvr := range []schema.GroupVersionResource{podgroup.UpstreamCompositeResource, podgroup.CompositeResource} {
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue // not served (or not readable): none of that kind
		}
		for i := range list.Items {
			c, err := podgroup.CompositeFromUnstructured(&list.Items[i])
			if err != nil {
				continue
			}
			key := c.Namespace + "/" + c.Name
			if byName[key] == nil {
				order = append(order, key)
			}
			byName[key] = c
		}
	}
	out := make([]*lockv1.CompositePodGroup, 0, len(order))
	for _, n := range order {
		out = append(out, byName[n])
	}
	return out
}

// treeAnswer words the scheduler's decision for the tree.
func treeAnswer(tree string, d decide.Decision) string {
	switch d.Kind {
	case decide.Wait:
		return fmt.Sprintf("%s is waiting: %s", tree, d.Reason)
	case decide.Bind:
		return fmt.Sprintf("%s fits now (%d pods placeable): the scheduler places it on its next attempt", tree, len(d.Assignments()))
	case decide.Error:
		return fmt.Sprintf("%s cannot be evaluated (SchedulerError): %v", tree, d.Err)
	}
	return fmt.Sprintf("%s is pending: %s", tree, d.Summary)
}

// byTree maps the decision's placement nodes back to the tree's.
func byTree(d decide.Decision) map[*podgroup.Tree]*placement.TreeNode {
	out := map[*podgroup.Tree]*placement.TreeNode{}
	for n, t := range d.Nodes {
		out[t] = n
	}
	return out
}

// nodeReport is t with each node's verdict (unplaced for a node the
// decision has none of).
func nodeReport(t *podgroup.Tree, nodes map[*podgroup.Tree]*placement.TreeNode, verdicts map[*placement.TreeNode]placement.Verdict, unplaced string) *TreeNodeReport {
	r := &TreeNodeReport{Name: t.Name(), Verdict: unplaced}
	if c := t.Composite; c != nil {
		r.Policy = "basic"
		if gang, n := podgroup.CompositeGang(c); gang {
			r.Policy = fmt.Sprintf("gang, minGroupCount %d", n)
		}
		if sc := c.Spec.SchedulingConstraints; sc != nil {
			for _, k := range sc.Topology {
				r.Topology = append(r.Topology, k.Key)
			}
		}
	} else {
		u := t.Unit
		r.Policy = "basic"
		if u.Gang() {
			r.Policy = fmt.Sprintf("gang, minCount %d", u.MinCount())
		}
		r.Topology = podgroup.TopologyKeys(u.Group)
		r.Members, r.Bound, r.Pending = len(u.Members), u.Bound, len(u.Pending)
	}
	if v, ok := verdicts[nodes[t]]; ok {
		r.Verdict = verdictText(t, v)
	}
	for _, c := range t.Children {
		r.Children = append(r.Children, nodeReport(c, nodes, verdicts, unplaced))
	}
	return r
}

func verdictText(t *podgroup.Tree, v placement.Verdict) string {
	what := "counts"
	if !v.Counts {
		what = "does not count"
	}
	if t.Composite != nil {
		what += fmt.Sprintf(": %d of %d groups", v.Counted, v.Of)
	}
	if v.Domain != "" {
		what += " in " + v.Domain
	}
	return what
}

// Lines draws the tree, one node a line, e.g.
//
//	CompositePodGroup ml/job (gang, minGroupCount 2; topology zone): does not count: 1 of 2 groups in zone=z1
//	├── PodGroup ml/w0 (gang, minCount 8; 0 of 8 bound, 8 pending): counts in zone=z1, rack=r0
func (n *TreeNodeReport) Lines() []string {
	return n.lines("", "")
}

func (n *TreeNodeReport) lines(first, rest string) []string {
	var details []string
	details = append(details, n.Policy)
	if len(n.Topology) > 0 {
		details = append(details, "topology "+strings.Join(n.Topology, ","))
	}
	if strings.HasPrefix(n.Name, "PodGroup ") {
		details = append(details, fmt.Sprintf("%d of %d bound, %d pending", n.Bound, n.Members, n.Pending))
	}
	out := []string{fmt.Sprintf("%s%s (%s): %s", first, n.Name, strings.Join(details, "; "), n.Verdict)}
	for i, c := range n.Children {
		if i == len(n.Children)-1 {
			out = append(out, c.lines(rest+"└── ", rest+"    ")...)
		} else {
			out = append(out, c.lines(rest+"├── ", rest+"│   ")...)
		}
	}
	return out
}
