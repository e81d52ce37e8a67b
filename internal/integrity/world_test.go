package integrity

import (
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// world is a tiny cluster the decision is exercised on, step by step: the
// test plays the scheduler (bind records the incarnation as the real one
// does), kubelets and controllers (finish, fail, delete, lose a node), and
// each decide() applies the verdict as the reconciler would.
type world struct {
	t     *testing.T
	now   time.Time
	pg    *lockv1.PodGroup
	pods  map[string]*corev1.Pod
	nodes map[string]*corev1.Node
	// claims and taints for device loss.
	claims map[string]*resourcev1.ResourceClaim
	taints map[structured.DeviceID][]resourcev1.DeviceTaint
	owner  *Owner
	// completions is the owner's size when it is a Job (0: no owner).
	completions int32
	restarts    []Loss
	evictions   int
	uid         int
	// departed are deleted pods' last states, as delete events carry them.
	departed map[types.UID]*corev1.Pod
	// hidden are pods a test keeps out of the cache for a while.
	hidden []*corev1.Pod
	// unseen are pods in the cluster the pod cache has not seen (its
	// informer is behind): out of the view, and their deletion sends no
	// delete event.
	unseen map[string]bool
	// nodeCache, for a node it has, is what the node cache shows of it
	// (nil: the cache does not hold it) instead of the node as it is.
	nodeCache map[string]*corev1.Node
	// reads counts the objects read from the API server for verdicts.
	reads int
}

func newWorld(t *testing.T, minCount int32, job bool) *world {
	w := &world{
		t: t, now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		pg:        &lockv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", Generation: 1}, Spec: lockv1.PodGroupSpec{SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: minCount}}}},
		pods:      map[string]*corev1.Pod{},
		nodes:     map[string]*corev1.Node{},
		claims:    map[string]*resourcev1.ResourceClaim{},
		taints:    map[structured.DeviceID][]resourcev1.DeviceTaint{},
		departed:  map[types.UID]*corev1.Pod{},
		unseen:    map[string]bool{},
		nodeCache: map[string]*corev1.Node{},
	}
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("node-%d", i)
		w.nodes[name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	if job {
		w.completions = minCount
		w.owner = &Owner{Name: "Job ns/train", Wants: func(i int32) bool { return i < w.completions }}
	}
	return w
}

// create makes pending ranks with indexes from..to-1 (as a Job controller does).
func (w *world) create(from, to int) {
	for i := from; i < to; i++ {
		w.uid++
		name := fmt.Sprintf("train-%d-%d", i, w.uid)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(strconv.Itoa(w.uid)),
			Labels: map[string]string{lockv1.PodGroupLabel: "train", lockv1.JobCompletionIndexLabel: strconv.Itoa(i)}},
			Spec:   corev1.PodSpec{SchedulerName: lockv1.SchedulerName},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
		w.pods[name] = p
	}
}

// bind binds every pending pod of the given indexes (all when none given)
// and records them, as the scheduler does after binding.
func (w *world) bind(indexes ...int) {
	var bound []*corev1.Pod
	for _, p := range w.sorted() {
		if !podgroup.Pending(p) || len(indexes) > 0 && !contains(indexes, *podgroup.MemberIndex(p)) {
			continue
		}
		p.Spec.NodeName = fmt.Sprintf("node-%d", *podgroup.MemberIndex(p)%4)
		p.Status.Phase = corev1.PodRunning
		bound = append(bound, p)
	}
	w.pg.Status.Incarnation = podgroup.Record(w.pg.Status.Incarnation, int32(podgroup.MinCount(w.pg)), w.sorted(), bound, metav1.NewTime(w.now))
}

func contains(xs []int, x int32) bool {
	for _, v := range xs {
		if int32(v) == x {
			return true
		}
	}
	return false
}

func (w *world) rank(i int) *corev1.Pod {
	for _, p := range w.sorted() {
		if *podgroup.MemberIndex(p) == int32(i) && p.DeletionTimestamp == nil && !podgroup.Terminal(p) {
			return p
		}
	}
	w.t.Fatalf("no live pod of rank %d", i)
	return nil
}

// health makes rank i's kubelet report its GPU (a DRA device of its claim)
// with the given health, as ResourceHealthStatus has it write the pod status.
func (w *world) health(i int, h corev1.ResourceHealthStatus) {
	p := w.rank(i)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer", AllocatedResourcesStatus: []corev1.ResourceStatus{{
		Name:      corev1.ResourceName("claim:" + p.Name + "-gpu/gpu"),
		Resources: []corev1.ResourceHealth{{ResourceID: corev1.ResourceID("gpu.example.com/" + p.Spec.NodeName + "/gpu-0"), Health: h, Message: ptr.To("XID 79")}},
	}}}}
}

func (w *world) succeed(i int) { w.rank(i).Status.Phase = corev1.PodSucceeded }
func (w *world) fail(i int)    { w.rank(i).Status.Phase = corev1.PodFailed }

// exit ends rank i's container with code, failing the pod; deleted, the pod
// was marked for deletion first.
func (w *world) exit(i int, code int32, deleted bool) {
	p := w.rank(i)
	if deleted {
		p.DeletionTimestamp = ptr.To(metav1.NewTime(w.now))
	}
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "rank", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}}}
}

// remove deletes the pod of rank i from the cluster at once.
func (w *world) remove(i int) { w.gone(w.rank(i)) }

// gone removes a pod; its delete event carries its last state, unless the
// pod cache never saw the pod.
func (w *world) gone(p *corev1.Pod) {
	delete(w.pods, p.Name)
	if !w.unseen[p.Name] {
		w.departed[p.UID] = p
	}
	delete(w.unseen, p.Name)
}

// behind makes the pod cache miss every pod there is now (its informer
// stopped before they were created, or a cache that is still empty).
func (w *world) behind() {
	for name := range w.pods {
		w.unseen[name] = true
	}
}

// catchUp brings the pod and node caches up to date.
func (w *world) catchUp() {
	w.unseen = map[string]bool{}
	w.nodeCache = map[string]*corev1.Node{}
}

// deleting starts a graceful deletion of rank i.
func (w *world) deleting(i int) { w.rank(i).DeletionTimestamp = ptr.To(metav1.NewTime(w.now)) }

// preempt marks and deletes every live member, as the scheduler does, and
// records the preemption (ending the incarnation) first.
func (w *world) preempt() {
	inc := w.pg.Status.Incarnation
	inc.Ended = &lockv1.PodGroupIncarnationEnd{Reason: lockv1.PodGroupReasonPreemption, Message: "by PodGroup ns/urgent", Time: metav1.NewTime(w.now)}
	for _, p := range w.pods {
		if podgroup.Active(p) {
			podgroup.SetPodCondition(p, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler})
			p.DeletionTimestamp = ptr.To(metav1.NewTime(w.now))
		}
	}
}

// terminate finishes every deletion (kubelet stops, pod removed).
func (w *world) terminate() {
	for _, p := range w.pods {
		if p.DeletionTimestamp != nil {
			w.gone(p)
		}
	}
}

func (w *world) sorted() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(w.pods))
	for _, p := range w.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// cached are the pods the pod cache holds.
func (w *world) cached() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range w.sorted() {
		if !w.unseen[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

func (w *world) view() View {
	return View{
		Group: w.pg, Pods: w.cached(), Departed: w.departed, Owner: w.owner, Now: w.now, NodeGrace: 40 * time.Second,
		Taints: func(id structured.DeviceID) []resourcev1.DeviceTaint { return w.taints[id] },
		Node: func(name string) (*corev1.Node, bool) {
			if n, ok := w.nodeCache[name]; ok {
				return n, n != nil
			}
			n, ok := w.nodes[name]
			return n, ok
		},
		Claim: func(ns, name string) *resourcev1.ResourceClaim {
			return w.claims[name]
		},
	}
}

// read is the API server's answer to a verdict's Confirm: the pods and
// nodes as they are.
func (w *world) read(c *Confirm, into *Reads) error {
	for _, m := range c.Pods {
		into.Pods[m.UID] = nil
		for _, p := range w.pods {
			if p.UID == m.UID {
				into.Pods[m.UID] = p
			}
		}
		w.reads++
	}
	for _, name := range c.Nodes {
		into.Nodes[name] = w.nodes[name]
		w.reads++
	}
	return nil
}

// decide decides, confirmed by reads as the reconciler does, and applies
// the verdict as the reconciler does (evicting only what the pod cache
// holds).
func (w *world) decide() Verdict {
	vd, err := Confirmed(w.view(), w.read)
	if err != nil {
		w.t.Fatal(err)
	}
	if vd.Incarnation != nil {
		w.pg.Status.Incarnation = vd.Incarnation
	}
	if vd.Running.Type != "" {
		meta.SetStatusCondition(&w.pg.Status.Conditions, vd.Running)
	}
	if vd.Restart != nil {
		w.restarts = append(w.restarts, *vd.Restart)
	}
	for _, p := range vd.Evict {
		cur := w.pods[p.Name]
		podgroup.SetPodCondition(cur, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: vd.EvictReason})
		cur.DeletionTimestamp = ptr.To(metav1.NewTime(w.now))
		w.evictions++
	}
	return vd
}

func (w *world) state() string {
	c := meta.FindStatusCondition(w.pg.Status.Conditions, lockv1.Running)
	if c == nil {
		return ""
	}
	return c.Reason
}

func (w *world) incarnation() int32 {
	if w.pg.Status.Incarnation == nil {
		return 0
	}
	return w.pg.Status.Incarnation.Number
}

func (w *world) advance(d time.Duration) { w.now = w.now.Add(d) }
