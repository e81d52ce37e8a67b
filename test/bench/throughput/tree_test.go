//go:build bench

package throughput

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// zoneKey is the zones' node label (specFmt: zones of zoneSize nodes, two
// racks each).
const (
	zoneKey  = corev1.LabelTopologyZone
	zoneSize = 2 * rackSize
)

// rootTemplate names the root's template in an in-tree tree's Workload;
// the children's are w0, w1, ….
const rootTemplate = "job"

// treeStall ends a tree wave that has bound no further pod for this long:
// a scheduler may leave a tree it does not admit unbound for ever, and
// what it bound is then recorded instead of waited for.
const treeStall = time.Minute

// TestTrees is issue 25's side-by-side: 10 scheduling trees, each a root
// CompositePodGroup (a gang of its 2 children) required in one zone over 2
// child PodGroups (gangs of 8 one-GPU DRA ranks) each required in one rack,
// under kube-scheduler 1.37's CompositePodGroup and
// TopologyAwareWorkloadScheduling (upstream profile: an in-tree
// scheduling.k8s.io/v1beta1 Workload with the tree's templates, a v1alpha3
// CompositePodGroup and v1beta1 PodGroups naming it as their parent) and
// under Lockstep (its own CompositePodGroup and PodGroups, the same
// fields). It runs below 1,000 nodes (the 100-node run of `make bench`: 5
// racks in 3 zones). Each wave records which trees were bound whole, partly
// or not at all, whether each child stayed in one rack and each tree in one
// zone, and the roots' conditions; it fails only on Lockstep's placement
// (a tree bound partly or outside its domains), never on time, and
// reports kube-scheduler's as measured.
func TestTrees(t *testing.T) {
	if !sized(t, false) {
		return
	}
	compare(t, workload{
		name: fmt.Sprintf("(f) 10 trees, each a root CompositePodGroup (gang of 2 children) required in one zone (%s) over 2 PodGroups (gangs of 8 one-GPU DRA ranks) each required in one rack (%s), %d nodes × 8 GPUs in %d racks, %d zones",
			zoneKey, rackKey, nodes, (nodes+rackSize-1)/rackSize, (nodes+zoneSize-1)/zoneSize),
		groups: 20, ranks: 8, children: 2, topology: rackKey, zone: zoneKey,
	})
}

// trees is how many trees the workload has.
func (w workload) trees() int {
	if w.children == 0 {
		return 0
	}
	return w.groups / w.children
}

// treeName is tree i's root (and, in-tree, its Workload).
func treeName(i int) string { return fmt.Sprintf("t%04d", i) }

// groupIndex is the index of group gNNNN.
func groupIndex(group string) (int, bool) {
	var i int
	_, err := fmt.Sscanf(group, "g%04d", &i)
	return i, err == nil
}

// parentOf is the root a group is a child of and its template in the
// tree's Workload ("" when the workload has no trees).
func (w workload) parentOf(group string) (root, template string) {
	i, ok := groupIndex(group)
	if w.children == 0 || !ok {
		return "", ""
	}
	return treeName(i / w.children), fmt.Sprintf("w%d", i%w.children)
}

// unitOf is what the wave counts as bound whole: the group, or its tree.
func (w workload) unitOf(group string) string {
	if root, _ := w.parentOf(group); root != "" {
		return root
	}
	return group
}

// unitPods is the number of pods of one unit (unitOf).
func (w workload) unitPods() int {
	if w.children > 0 {
		return w.children * w.ranks
	}
	return w.ranks
}

// stallWatch returns a function that, fed the bound count at each poll,
// reports when a tree wave has bound no further pod for treeStall (always
// false for other workloads: they wait for every pod).
func stallWatch(w workload) func(bound int) bool {
	if w.children == 0 {
		return func(int) bool { return false }
	}
	last, since := -1, time.Now()
	return func(bound int) bool {
		if bound != last {
			last, since = bound, time.Now()
			return false
		}
		return bound < w.pods() && time.Since(since) > treeStall
	}
}

// createRoot creates tree tr's root, a gang of all its children required
// in one domain of w.zone: for kube-scheduler an in-tree v1beta1 Workload
// holding the tree's templates and a v1alpha3 CompositePodGroup made from
// it (its workloadRef is required), for Lockstep its own CompositePodGroup.
func createRoot(ctx context.Context, t *testing.T, h *harness.Harness, v variant, ns string, tr int, w workload) {
	t.Helper()
	name := treeName(tr)
	if !v.kube {
		c := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		c.APIVersion = lockv1.GroupVersion.String()
		c.Spec.SchedulingPolicy.Gang = &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: int32(w.children)}
		c.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: w.zone}}}
		u, err := podgroup.CompositeToUnstructured(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating CompositePodGroup %s: %v", name, err)
		}
		return
	}
	wl := upstreamWorkload(ns, name, w)
	got, err := h.Client.SchedulingV1beta1().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Workload %s: %v", name, err)
	}
	if len(got.Spec.CompositePodGroupTemplates) == 0 {
		t.Fatalf("the API server dropped Workload %s's spec.compositePodGroupTemplates: CompositePodGroup is off", name)
	}
	c := &schedulingv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			WorkloadRef: &schedulingv1alpha3.WorkloadReference{WorkloadName: name, TemplateName: rootTemplate},
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: int32(w.children)},
			},
			SchedulingConstraints: &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{Topology: []schedulingv1alpha3.TopologyConstraint{{Key: w.zone}}},
		},
	}
	gotC, err := h.Client.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating CompositePodGroup %s: %v", name, err)
	}
	if gotC.Spec.SchedulingConstraints == nil {
		t.Fatalf("the API server dropped CompositePodGroup %s's spec.schedulingConstraints: TopologyAwareWorkloadScheduling is off", name)
	}
}

// upstreamWorkload is an in-tree Workload whose one composite template
// (rootTemplate, gang of w.children in one w.zone domain) holds w.children
// PodGroup templates w0, w1, … (gangs of w.ranks in one w.topology domain).
func upstreamWorkload(ns, name string, w workload) *schedulingv1beta1.Workload {
	children := make([]schedulingv1beta1.PodGroupTemplate, w.children)
	for i := range children {
		children[i] = schedulingv1beta1.PodGroupTemplate{
			Name:                  fmt.Sprintf("w%d", i),
			SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(w.ranks)}},
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: w.topology}}},
		}
	}
	return &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.WorkloadSpec{CompositePodGroupTemplates: []schedulingv1beta1.CompositePodGroupTemplate{{
			Name: rootTemplate,
			SchedulingPolicy: schedulingv1beta1.CompositePodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.CompositeGangSchedulingPolicy{MinGroupCount: int32(w.children)},
			},
			SchedulingConstraints: &schedulingv1beta1.CompositePodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: w.zone}}},
			PodGroupTemplates:     children,
		}}},
	}
}

// treeResult is where one wave's trees were bound.
type treeResult struct {
	// whole, partly, none: trees with every, some, no pod bound.
	whole, partly, none int
	// childrenBound: children with a bound pod, of which childrenOneRack
	// have all their bound pods in one rack; treesBound, treesOneZone the
	// same for trees and zones.
	childrenBound, childrenOneRack, treesBound, treesOneZone int
	// zones: trees wholly bound in one zone, by zone.
	zones map[string]int
	// bound pods; stalled: not every pod was bound (the wave ended after
	// treeStall without a binding).
	bound   int
	stalled bool
	// conditions: the roots' CompositePodGroupInitiallyScheduled
	// conditions, counted by status/reason (once all True, or
	// conditionSettle after the last pod was bound); pending: an unbound pod's
	// PodScheduled message.
	conditions, pending string
	// children: the child PodGroups' PodGroupInitiallyScheduled
	// conditions, counted by status/reason (read after conditions).
	children string
}

// checkTrees records where the wave's trees were bound, logs each tree's
// domains, and fails the test when Lockstep bound a tree partly, left one
// unbound, or put a child outside one rack or a tree outside one zone.
func checkTrees(t *testing.T, ctx context.Context, h *harness.Harness, v variant, ns string, w workload) *treeResult {
	t.Helper()
	nodeList, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]string{}
	for _, n := range nodeList.Items {
		labels[n.Name] = n.Labels
	}
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	r := &treeResult{zones: map[string]int{}}
	bound := map[string]int{}                 // tree → bound pods
	racks := map[string]map[string]bool{}     // child → racks of its bound pods
	zones := map[string]map[string]bool{}     // tree → zones of its bound pods
	childRacks := map[string]map[string]int{} // tree → child → rack (for the log)
	for i := range pods.Items {
		p := &pods.Items[i]
		g := groupOf(p)
		tree := w.unitOf(g)
		if p.Spec.NodeName == "" {
			if c := podScheduled(p); r.pending == "" && c != nil {
				r.pending = fmt.Sprintf("pod %s: %s/%s: %s", p.Name, c.Status, c.Reason, c.Message)
			}
			continue
		}
		r.bound++
		bound[tree]++
		add(racks, g, labels[p.Spec.NodeName][w.topology])
		add(zones, tree, labels[p.Spec.NodeName][w.zone])
		if childRacks[tree] == nil {
			childRacks[tree] = map[string]int{}
		}
		childRacks[tree][g+" "+labels[p.Spec.NodeName][w.topology]]++
	}
	r.stalled = r.bound < w.pods()
	for i := 0; i < w.trees(); i++ {
		tree := treeName(i)
		switch bound[tree] {
		case w.unitPods():
			r.whole++
		case 0:
			r.none++
		default:
			r.partly++
		}
		if one(zones[tree]) && bound[tree] == w.unitPods() {
			r.zones[only(zones[tree])]++
		}
		t.Logf("%s: %s %d of %d pods bound, zones %v, child rack: pods %v", v.name, tree, bound[tree], w.unitPods(), keys(zones[tree]), childRacks[tree])
	}
	r.childrenBound, r.childrenOneRack = len(racks), count(racks, one)
	r.treesBound, r.treesOneZone = len(zones), count(zones, one)
	r.conditions = rootConditions(t, ctx, h, v, ns)
	r.children = childConditions(t, ctx, h, v, ns)
	t.Logf("%s: %d trees whole, %d partly, %d unbound (%d of %d pods bound); %d of %d children in one %s, %d of %d trees in one %s (whole trees by zone %v); roots' conditions: %s; children's: %s",
		v.name, r.whole, r.partly, r.none, r.bound, w.pods(), r.childrenOneRack, r.childrenBound, w.topology, r.treesOneZone, r.treesBound, w.zone, r.zones, r.conditions, r.children)
	if r.pending != "" {
		t.Logf("%s: first unbound pod: %s", v.name, r.pending)
	}
	if !v.kube && (r.whole != w.trees() || r.childrenOneRack != r.childrenBound || r.treesOneZone != r.treesBound) {
		t.Errorf("%s: want all %d trees bound whole, each child in one %s and each tree in one %s; got %d whole, %d partly, %d unbound, %d of %d children in one rack, %d of %d trees in one zone",
			v.name, w.trees(), w.topology, w.zone, r.whole, r.partly, r.none, r.childrenOneRack, r.childrenBound, r.treesOneZone, r.treesBound)
	}
	return r
}

func add(m map[string]map[string]bool, k, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

// one: exactly one domain, and a labelled one.
func one(s map[string]bool) bool { return len(s) == 1 && !s[""] }

func only(s map[string]bool) string {
	for k := range s {
		return k
	}
	return ""
}

func count(m map[string]map[string]bool, f func(map[string]bool) bool) int {
	n := 0
	for _, s := range m {
		if f(s) {
			n++
		}
	}
	return n
}

func keys(s map[string]bool) []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func podScheduled(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// conditionSettle is how long, after the last pod was bound, the roots'
// conditions are given to become True (the scheduler still running).
const conditionSettle = 10 * time.Second

// rootConditions counts the roots' CompositePodGroupInitiallyScheduled
// conditions by status/reason (in-tree roots for kube-scheduler,
// Lockstep's for Lockstep), with the first message that is not True,
// once every root's is True or after conditionSettle.
func rootConditions(t *testing.T, ctx context.Context, h *harness.Harness, v variant, ns string) string {
	t.Helper()
	deadline := time.Now().Add(conditionSettle)
	for {
		summary, settled := rootConditionsOnce(t, ctx, h, v, ns)
		if settled || time.Now().After(deadline) {
			return summary
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rootConditionsOnce is one reading of rootConditions; settled: every
// root's condition is True.
func rootConditionsOnce(t *testing.T, ctx context.Context, h *harness.Harness, v variant, ns string) (string, bool) {
	t.Helper()
	res := podgroup.CompositeResource
	if v.kube {
		res = podgroup.UpstreamCompositeResource
	}
	list, err := h.Dynamic.Resource(res).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts, msg := map[string]int{}, ""
	for i := range list.Items {
		c, err := podgroup.CompositeFromUnstructured(&list.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled)
		if cond == nil {
			counts["none"]++
			continue
		}
		counts[string(cond.Status)+"/"+cond.Reason]++
		if cond.Status != metav1.ConditionTrue && msg == "" {
			msg = fmt.Sprintf("; %s: %q", c.Name, cond.Message)
		}
	}
	parts := make([]string, 0, len(counts))
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ") + msg, counts["True/"+lockv1.PodGroupReasonScheduled] == len(list.Items)
}

// childConditions counts the child PodGroups' PodGroupInitiallyScheduled
// conditions by status/reason (in-tree PodGroups for kube-scheduler,
// Lockstep's for Lockstep).
func childConditions(t *testing.T, ctx context.Context, h *harness.Harness, v variant, ns string) string {
	t.Helper()
	res := podgroup.Resource
	if v.kube {
		res = podgroup.UpstreamResource
	}
	list, err := h.Dynamic.Resource(res).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for i := range list.Items {
		var status struct {
			Conditions []metav1.Condition `json:"conditions"`
		}
		if m, ok := list.Items[i].Object["status"].(map[string]any); ok {
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(m, &status); err != nil {
				t.Fatal(err)
			}
		}
		if c := meta.FindStatusCondition(status.Conditions, lockv1.PodGroupInitiallyScheduled); c != nil {
			counts[string(c.Status)+"/"+c.Reason]++
		} else {
			counts["none"]++
		}
	}
	parts := make([]string, 0, len(counts))
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// treeTable prints each round of each scheduler: times (— where not every
// pod was bound), trees bound whole/partly/not at all, children in one
// rack, trees in one zone, whole trees by zone; then the medians of the
// rounds that bound everything and Lockstep's ratios.
func treeTable(w workload, vs []variant, results map[string][]result) string {
	host, _ := os.Hostname()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s — %d interleaved rounds; %s, %d CPUs, shared with the control plane:\n", w.name, rounds, host, runtime.NumCPU())
	fmt.Fprintf(&b, "  %-15s %5s %10s %15s %11s %17s %14s %15s %9s   %s\n", "scheduler", "round", "all bound", "after last pod", "first tree", "trees whole/part/0", "children 1 rack", "trees 1 zone", "peak RSS", "whole trees by zone; roots' conditions; children's")
	for _, v := range vs {
		for i, r := range results[v.name] {
			tr := r.trees
			all, after, first := "—", "—", "—"
			if !tr.stalled {
				all, after = r.all.Round(time.Millisecond).String(), r.afterLast.Round(time.Millisecond).String()
			}
			if r.first > 0 {
				first = r.first.Round(time.Millisecond).String()
			}
			fmt.Fprintf(&b, "  %-15s %5d %10s %15s %11s %17s %14s %15s %5d MiB   %v; %s; %s\n", v.name, i, all, after, first,
				fmt.Sprintf("%d/%d/%d", tr.whole, tr.partly, tr.none), fmt.Sprintf("%d of %d", tr.childrenOneRack, tr.childrenBound),
				fmt.Sprintf("%d of %d", tr.treesOneZone, tr.treesBound), r.rss>>20, tr.zones, tr.conditions, tr.children)
			if tr.stalled {
				fmt.Fprintf(&b, "  %-15s %5s %d of %d pods bound, none more in %s; %s\n", "", "", tr.bound, w.pods(), treeStall, tr.pending)
			}
		}
	}
	ref := medians(complete(results["kube-scheduler"]))
	for _, v := range vs {
		rs := complete(results[v.name])
		if len(rs) == 0 {
			fmt.Fprintf(&b, "  %-15s no round bound every pod\n", v.name)
			continue
		}
		m, ratio := medians(rs), ""
		if !v.kube && ref.all > 0 {
			ratio = fmt.Sprintf("; vs kube-scheduler %.2f× after the last pod, %.2f× all bound", ref.afterLast.Seconds()/m.afterLast.Seconds(), ref.all.Seconds()/m.all.Seconds())
		}
		fmt.Fprintf(&b, "  %-15s median of %d complete rounds: all bound %s, after the last pod %s, first tree %s%s\n", v.name, len(rs),
			m.all.Round(time.Millisecond), m.afterLast.Round(time.Millisecond), m.first.Round(time.Millisecond), ratio)
	}
	return b.String()
}

// complete are the rounds that bound every pod.
func complete(rs []result) []result {
	var out []result
	for _, r := range rs {
		if r.trees != nil && !r.trees.stalled {
			out = append(out, r)
		}
	}
	return out
}
