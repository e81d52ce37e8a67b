package simulate

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// FailedDeviceTaint is the key of the NoExecute taint a failed device
// gets (DRA device taints: the allocator skips it, its pods are evicted).
const FailedDeviceTaint = "sim.lockstep.dev/failed"

// Reasons kube-controller-manager's taint eviction controllers give a
// pod they delete (DisruptionTarget).
const (
	reasonTaintManager       = "DeletionByTaintManager"
	reasonDeviceTaintManager = "DeletionByDeviceTaintManager"
)

// fail takes a node, or one device, out of service: a node is tainted
// NoExecute (unreachable) and NotReady, a device tainted NoExecute; the
// pods on it are evicted, as the taint eviction controllers do, and
// replaced by their controllers. Under a model with restarts every gang
// that lost a member is judged by the integrity controller's Decide and,
// when it says so, taken down whole.
func (w *world) fail(f *workload.Failure) {
	var lost []*podRun
	reason := reasonTaintManager
	if f.Device == "" {
		n := w.nodes[f.Node].DeepCopy()
		at := metav1.NewTime(w.clk.Now())
		n.Spec.Taints = append(n.Spec.Taints,
			corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at},
			corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at})
		setReady(n, corev1.ConditionFalse, at)
		w.nodes[n.Name] = n
		w.st.Cache.UpdateNode(n)
		lost = sortedPods(w.onNode[f.Node])
		w.rec.nodeDown(f.Node, true)
	} else {
		reason = reasonDeviceTaintManager
		old, sl, id := w.deviceSlice(f)
		at := metav1.NewTime(w.clk.Now())
		for i := range sl.Spec.Devices {
			if sl.Spec.Devices[i].Name == f.Device {
				sl.Spec.Devices[i].Taints = append(sl.Spec.Devices[i].Taints, resourcev1.DeviceTaint{Key: FailedDeviceTaint, Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &at})
			}
		}
		w.slices[sl.Name] = sl
		w.st.Cache.UpdateSlice(old, sl)
		lost = w.holding(id)
		w.rec.deviceDown(f.Node, +1)
	}
	w.lose(lost, reason)
}

// repair brings a failed node or device back.
func (w *world) repair(f *workload.Failure) {
	if f.Device == "" {
		n := w.nodes[f.Node].DeepCopy()
		kept := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeUnreachable {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
		setReady(n, corev1.ConditionTrue, metav1.NewTime(w.clk.Now()))
		w.nodes[n.Name] = n
		w.st.Cache.UpdateNode(n)
		w.rec.nodeDown(f.Node, false)
	} else {
		old, sl, _ := w.deviceSlice(f)
		for i := range sl.Spec.Devices {
			d := &sl.Spec.Devices[i]
			if d.Name != f.Device {
				continue
			}
			kept := d.Taints[:0]
			for _, t := range d.Taints {
				if t.Key != FailedDeviceTaint {
					kept = append(kept, t)
				}
			}
			d.Taints = kept
		}
		w.slices[sl.Name] = sl
		w.st.Cache.UpdateSlice(old, sl)
		w.rec.deviceDown(f.Node, -1)
	}
	w.freed++
	w.changed++
}

func setReady(n *corev1.Node, status corev1.ConditionStatus, at metav1.Time) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].LastTransitionTime = status, at
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastTransitionTime: at})
}

// deviceSlice finds the slice of a failure's device (Check made sure
// there is exactly one): the slice now, a copy to change, and the device.
func (w *world) deviceSlice(f *workload.Failure) (*resourcev1.ResourceSlice, *resourcev1.ResourceSlice, structured.DeviceID) {
	for _, name := range sortedKeys(w.slices) {
		sl := w.slices[name]
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName != f.Node || f.Driver != "" && sl.Spec.Driver != f.Driver {
			continue
		}
		for _, d := range sl.Spec.Devices {
			if d.Name == f.Device {
				return sl, sl.DeepCopy(), structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name)
			}
		}
	}
	panic("simulate: failure of a device Check did not find: " + f.Ref())
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// holding are the bound pods whose claims hold device id.
func (w *world) holding(id structured.DeviceID) []*podRun {
	var out []*podRun
	for _, pr := range w.pods {
		if pr.node == "" {
			continue
		}
		for _, name := range snapshot.PodClaimNames(pr.pod) {
			c := w.claims[types.NamespacedName{Namespace: pr.pod.Namespace, Name: name}]
			for _, got := range snapshot.ClaimDevices(c) {
				if got == id {
					out = append(out, pr)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pod.Name < out[j].pod.Name })
	return out
}

// lose evicts the pods a failure took (their DisruptionTarget says who
// evicted them) and, under a model with restarts, whatever the integrity
// controller's verdict takes down with them.
func (w *world) lose(lost []*podRun, reason string) {
	now := metav1.NewTime(w.clk.Now())
	var groups []*groupRun
	for _, pr := range lost {
		p := pr.pod.DeepCopy()
		p.Status.Phase = corev1.PodFailed
		podgroup.SetPodCondition(p, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now})
		pr.pod = p
		if g := pr.group; g != nil && !containsGroup(groups, g) {
			groups = append(groups, g)
		}
	}
	evict := append([]*podRun(nil), lost...)
	if w.m.restarts {
		for _, g := range groups {
			evict = append(evict, w.restart(g)...)
		}
		for _, g := range groups {
			evict = append(evict, w.restartTree(g)...)
		}
	}
	w.workLost(evict)
	for _, pr := range evict {
		if w.pods[pr.pod.UID] == pr {
			w.evict(pr)
		}
	}
}

func containsGroup(gs []*groupRun, g *groupRun) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// workLost records the runs cut short by losing these pods.
func (w *world) workLost(pods []*podRun) {
	var jobs []*jobRun
	for _, pr := range pods {
		if !containsJob(jobs, pr.job) {
			jobs = append(jobs, pr.job)
		}
	}
	for _, j := range jobs {
		if j.state == stateRunning && j.spec.Gang() {
			w.rec.failureLost += w.cutShort(j, false)
		}
	}
}

// restart is the integrity controller's verdict on a group that lost a
// member: the pods to take down with it (none unless its disruptionMode
// is all).
func (w *world) restart(g *groupRun) []*podRun {
	if podgroup.Upstream(g.pg) {
		return nil
	}
	vd := integrity.Decide(w.view(g))
	if vd.Incarnation != nil {
		pg := g.pg.DeepCopy()
		pg.Status.Incarnation = vd.Incarnation
		g.pg = pg
	}
	if vd.Restart == nil {
		return nil
	}
	g.job.restarts++
	w.rec.restarts++
	var out []*podRun
	for _, p := range vd.Evict {
		if pr := w.pods[p.UID]; pr != nil {
			out = append(out, pr)
		}
	}
	return out
}

// restartTree is the integrity controller's verdict on the rest of a
// tree whose group g ended for a loss (integrity.TreeRestarts): every
// other running group under the CompositePodGroup with disruptionMode all
// ends with it, its members taken down.
func (w *world) restartTree(g *groupRun) []*podRun {
	t := g.job.tree
	if t == nil {
		return nil
	}
	var pgs []*lockv1.PodGroup
	for _, o := range g.job.groups {
		pgs = append(pgs, o.pg)
	}
	var out []*podRun
	for _, r := range integrity.TreeRestarts(g.pg, pgs, func(name string) *lockv1.CompositePodGroup {
		if name == t.root.Name {
			return t.root
		}
		return nil
	}) {
		o := w.groups[types.NamespacedName{Namespace: r.Group.Namespace, Name: r.Group.Name}]
		pg := o.pg.DeepCopy()
		pg.Status.Incarnation = r.Incarnation
		o.pg = pg
		for _, pr := range sortedPods(o.pods) {
			if pr.node != "" {
				out = append(out, pr)
			}
		}
	}
	return out
}

// view is what the integrity controller reads about a group, read from
// the world (which is what the API server would answer: nothing to
// confirm).
func (w *world) view(g *groupRun) integrity.View {
	reads := &integrity.Reads{Pods: map[types.UID]*corev1.Pod{}, Nodes: map[string]*corev1.Node{}}
	if inc := g.pg.Status.Incarnation; inc != nil {
		for _, m := range inc.Members {
			if pr := w.pods[m.UID]; pr != nil {
				reads.Pods[m.UID] = pr.pod
			} else {
				reads.Pods[m.UID] = nil
			}
		}
	}
	for name, n := range w.nodes {
		reads.Nodes[name] = n
	}
	return integrity.View{
		Group: g.pg,
		Pods:  g.podList(),
		Node: func(name string) (*corev1.Node, bool) {
			n, ok := w.nodes[name]
			return n, ok
		},
		Claim: func(ns, name string) *resourcev1.ResourceClaim {
			return w.claims[types.NamespacedName{Namespace: ns, Name: name}]
		},
		Taints: w.deviceTaints,
		Owner:  &integrity.Owner{Name: g.job.spec.Ref(), Wants: func(int32) bool { return true }, Size: len(g.job.spec.Pods)},
		Now:    w.clk.Now(),
		Read:   reads,
	}
}

func (w *world) deviceTaints(id structured.DeviceID) []resourcev1.DeviceTaint {
	for _, sl := range w.slices {
		if sl.Spec.Driver != id.Driver.String() || sl.Spec.Pool.Name != id.Pool.String() {
			continue
		}
		for _, d := range sl.Spec.Devices {
			if d.Name == id.Device.String() {
				return d.Taints
			}
		}
	}
	return nil
}
