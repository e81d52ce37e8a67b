package scheduler

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// compositeCondition is the CompositePodGroup's
// CompositePodGroupInitiallyScheduled condition as "Status/Reason: message".
func compositeCondition(c *lockv1.CompositePodGroup) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == lockv1.CompositePodGroupInitiallyScheduled {
			return string(cond.Status) + "/" + cond.Reason + ": " + cond.Message
		}
	}
	return ""
}

// tree is a root CompositePodGroup (gang of minGroupCount) and, under it,
// one gang PodGroup per size with that many one-GPU pods.
func tree(minGroupCount int32, sizes ...int) []runtime.Object {
	root := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "job"},
		Spec: lockv1.CompositePodGroupSpec{SchedulingPolicy: lockv1.CompositePodGroupSchedulingPolicy{Gang: &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}}}}
	objs := []runtime.Object{root}
	for i, n := range sizes {
		name := "w" + string(rune('1'+i))
		pg := builders.GangPodGroup("ml", name, int32(n))
		pg.Spec.ParentCompositePodGroupName = ptr.To("job")
		objs = append(objs, pg)
		objs = append(objs, gpuPods("ml", name, name, n, 0)...)
	}
	return objs
}

// A tree that fits binds every leaf in one binding cycle: claims before
// bindings, each leaf's incarnation and Scheduled condition, the
// composite's condition; the tree leaves the queue.
func TestExecuteBindsATreeThatFits(t *testing.T) {
	f := newFixture(t, twoNodes, tree(2, 2, 2)...)
	k := queue.TreeKey("ml", "job")
	f.run(k)
	writes := f.writes()
	phases(t, writes)
	if n := len(only(writes, "pods/binding")); n != 4 {
		t.Errorf("%d bindings, want 4:\n%s", n, strings.Join(writes, "\n"))
	}
	if got, want := compositeCondition(f.compositeOf("ml", "job")), "True/Scheduled: 2 of 2 groups placed (minGroupCount 2) in all nodes"; got != want {
		t.Errorf("composite condition %q, want %q", got, want)
	}
	for _, g := range []string{"w1", "w2"} {
		pg := f.group("ml", g)
		if got := condition(pg); got != "True/Scheduled: 2 of 2 pods placed (minCount 2)" {
			t.Errorf("%s: condition %q", g, got)
		}
		if inc := pg.Status.Incarnation; inc == nil || len(inc.Members) != 2 {
			t.Errorf("%s: incarnation %+v, want its 2 members", g, inc)
		}
	}
	if got := f.queue.of(k); got != "Done" {
		t.Errorf("queue transitions %q, want Done", got)
	}
}

// A tree that does not fit binds nothing: the composite says why with the
// arithmetic, each leaf and each member say the tree does not fit, and the
// tree is parked.
func TestExecuteTreeIsAllOrNothing(t *testing.T) {
	f := newFixture(t, twoNodes, tree(2, 2, 3)...)
	k := queue.TreeKey("ml", "job")
	f.run(k)
	writes := f.writes()
	if n := len(only(writes, "pods/binding")) + len(only(writes, "resourceclaims")); n != 0 {
		t.Errorf("a tree that does not fit wrote %d bindings or claims", n)
	}
	got := compositeCondition(f.compositeOf("ml", "job"))
	if !strings.HasPrefix(got, "False/Unschedulable: CompositePodGroup ml/job: 1 of 2 groups fit (minGroupCount 2) in all nodes; PodGroup ml/w2: minCount 3 not satisfiable") {
		t.Errorf("composite condition %q", got)
	}
	for _, g := range []string{"w1", "w2"} {
		if got := condition(f.group("ml", g)); !strings.HasPrefix(got, "False/Unschedulable: the scheduling tree of CompositePodGroup job does not fit") {
			t.Errorf("%s: condition %q", g, got)
		}
	}
	if got, want := podScheduled(f.pod("ml", "w1-0")), "False/Unschedulable: CompositePodGroup job: the scheduling tree does not fit; its CompositePodGroupInitiallyScheduled condition has the arithmetic"; got != want {
		t.Errorf("member condition %q, want %q", got, want)
	}
	if got := f.queue.of(k); got != "Unschedulable" {
		t.Errorf("queue transitions %q, want Unschedulable", got)
	}
}

// A group of a tree is never placed on its own: its cycle hands over to
// its tree; a group whose parent does not exist waits, saying so.
func TestGroupOfATreeIsNeverPlacedAlone(t *testing.T) {
	orphan := builders.GangPodGroup("ml", "orphan", 1)
	orphan.Spec.ParentCompositePodGroupName = ptr.To("gone")
	objs := append(tree(2, 2, 2), orphan)
	objs = append(objs, gpuPods("ml", "orphan", "orphan", 1, 0)...)
	f := newFixture(t, twoNodes, objs...)
	w1 := queue.GroupKey("ml", "w1")
	f.run(w1)
	if w := only(f.writes(), "pods/binding"); len(w) != 0 {
		t.Errorf("a group of a tree bound alone: %v", w)
	}
	if got := f.queue.of(w1); got != "Done" {
		t.Errorf("w1: queue transitions %q, want Done (its tree decides)", got)
	}
	k := queue.GroupKey("ml", "orphan")
	f.run(k)
	if diff := cmp.Diff([]string(nil), only(f.writes(), "pods/binding")); diff != "" {
		t.Errorf("an orphan bound: %s", diff)
	}
	if got := condition(f.group("ml", "orphan")); got != "False/WaitingForParent: waiting for CompositePodGroup gone, its parent, which does not exist: a group of a tree is never scheduled on its own" {
		t.Errorf("orphan condition %q", got)
	}
	if got := f.queue.of(k); got != "Wait" {
		t.Errorf("orphan: queue transitions %q, want Wait", got)
	}
}

// An API server without the CompositePodGroup CRD (an upgrade that did not
// apply it): the scheduler starts without that kind instead of waiting for
// its informer, says so in lockstep_scheduler_kind_served, schedules a
// flat gang, and a group naming a parent waits for it, saying so.
func TestStartsWithoutCompositePodGroups(t *testing.T) {
	child := builders.GangPodGroup("ml", "w1", 1)
	child.Spec.ParentCompositePodGroupName = ptr.To("job")
	objs := []runtime.Object{builders.GangPodGroup("ml", "flat", 2), child}
	objs = append(objs, gpuPods("ml", "flat", "flat", 2, 0)...)
	objs = append(objs, gpuPods("ml", "w1", "w1", 1, 0)...)
	f := newFixtureServing(t, twoNodes, []string{"podgroups", "workloads"}, objs...)
	if got := testutil.ToFloat64(f.s.metrics.KindServed.WithLabelValues("compositepodgroups.scheduling.lockstep.dev")); got != 0 {
		t.Errorf("lockstep_scheduler_kind_served for compositepodgroups %v, want 0", got)
	}
	f.run(queue.GroupKey("ml", "flat"))
	if w := only(f.writes(), "pods/binding"); len(w) != 2 {
		t.Errorf("the flat gang's bindings %v, want 2", w)
	}
	f.run(queue.GroupKey("ml", "w1"))
	if got := condition(f.group("ml", "w1")); !strings.HasPrefix(got, "False/WaitingForParent: waiting for CompositePodGroup job") {
		t.Errorf("w1 condition %q, want it waiting for its parent", got)
	}
}

// A scheduler that died between binding a tree and writing its status
// leaves the root and each leaf with their old condition. The next cycle of
// the tree — nothing pending — writes what the bound members earned: each
// leaf's incarnation and Scheduled condition, the root's, and nothing is
// bound again. A flat group in the same state gets its condition too.
func TestBoundTreeStatusAfterACrash(t *testing.T) {
	stale := metav1.Condition{Type: lockv1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: lockv1.PodGroupReasonUnschedulable, Message: "old"}
	objs := tree(2, 2, 2)
	for _, o := range objs {
		switch g := o.(type) {
		case *lockv1.CompositePodGroup:
			g.Status.Conditions = []metav1.Condition{{Type: lockv1.CompositePodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: lockv1.PodGroupReasonUnschedulable, Message: "old"}}
		case *lockv1.PodGroup:
			g.Status.Conditions = []metav1.Condition{stale}
		}
	}
	// objs: the root, then w1 with its 2 pods and claims, then w2 with its.
	running(objs[1:6], "gpu-0", 0)
	running(objs[6:11], "gpu-1", 0)
	flat := builders.GangPodGroup("ml", "flat", 1)
	flat.Status.Conditions = []metav1.Condition{stale}
	pod := builders.MakePod().Namespace("ml").Name("flat-0").Scheduler(lockv1.SchedulerName).Member("flat").Node("gpu-1").Obj()
	pod.UID, pod.Status.Phase = "ml-flat-0", corev1.PodRunning
	objs = append(objs, flat, pod)
	f := newFixture(t, twoNodes, objs...)
	f.run(queue.TreeKey("ml", "job"))
	f.run(queue.GroupKey("ml", "flat"))
	if n := len(only(f.writes(), "pods/binding")); n != 0 {
		t.Errorf("%d bindings of pods already bound", n)
	}
	if got, want := compositeCondition(f.compositeOf("ml", "job")), "True/Scheduled: 2 of 2 groups placed (minGroupCount 2)"; got != want {
		t.Errorf("root condition %q, want %q", got, want)
	}
	for _, g := range []string{"w1", "w2"} {
		pg := f.group("ml", g)
		if got := condition(pg); got != "True/Scheduled: 2 of 2 pods placed (minCount 2)" {
			t.Errorf("%s: condition %q", g, got)
		}
		if inc := pg.Status.Incarnation; inc == nil || len(inc.Members) != 2 {
			t.Errorf("%s: incarnation %+v, want its 2 members", g, inc)
		}
	}
	if got := condition(f.group("ml", "flat")); got != "True/Scheduled: 1 of 1 pods placed (minCount 1)" {
		t.Errorf("flat group: condition %q", got)
	}
}

// A tree whose root requires a topology key no node carries is never
// reached by placement; its condition says why — the key, the node it is
// missing from — never an empty message.
func TestTreeWithAKeyNoNodeCarriesSaysSo(t *testing.T) {
	objs := tree(2, 2, 2)
	objs[0].(*lockv1.CompositePodGroup).Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: "example.com/none"}}}
	f := newFixture(t, twoNodes, objs...)
	f.run(queue.TreeKey("ml", "job"))
	const want = "CompositePodGroup ml/job requires topology key example.com/none, which no node carries"
	if got := compositeCondition(f.compositeOf("ml", "job")); !strings.Contains(got, want) {
		t.Errorf("root condition %q, want it to say %q", got, want)
	}
	if got := condition(f.group("ml", "w1")); !strings.Contains(got, want) {
		t.Errorf("leaf condition %q, want it to say %q", got, want)
	}
}

// The queue's order function only reads: ordering a composite that is not
// a root queues nothing (it used to resolve the tree and queue its root
// from inside the queue's callback), and a tree orders by its members'
// lowest priority and its root's age.
func TestTreeOrderIsPure(t *testing.T) {
	objs := tree(2, 2, 2)
	child := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "inner"},
		Spec: lockv1.CompositePodGroupSpec{ParentCompositePodGroupName: ptr.To("job"), SchedulingPolicy: lockv1.CompositePodGroupSchedulingPolicy{Gang: &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 1}}}}
	pg := builders.GangPodGroup("ml", "low", 1)
	pg.Spec.ParentCompositePodGroupName = ptr.To("inner")
	objs = append(objs, child, pg)
	objs = append(objs, gpuPods("ml", "low", "low", 1, -5)...)
	f := newFixture(t, twoNodes, objs...)
	before, _ := f.queue.Len()
	if prio, _ := f.s.order(queue.TreeKey("ml", "inner")); prio != -5 {
		t.Errorf("inner composite ordered at priority %d, want its members' -5", prio)
	}
	if prio, _ := f.s.order(queue.TreeKey("ml", "job")); prio != -5 {
		t.Errorf("tree ordered at priority %d, want its lowest member's -5", prio)
	}
	if after, _ := f.queue.Len(); after != before {
		t.Errorf("ordering queued %d keys", after-before)
	}
}

// A pod of a group that hangs in a tree is keyed by its tree's root — the
// queue and restored nominations see one unit, not the group and then its
// tree — a pod of a flat group by its group, a lone pod by itself, and a
// group whose tree has no root by the group (its cycle says why it waits).
func TestPodsAreKeyedByTheirRoot(t *testing.T) {
	objs := tree(2, 2, 2)
	orphan := builders.GangPodGroup("ml", "orphan", 1)
	orphan.Spec.ParentCompositePodGroupName = ptr.To("gone")
	objs = append(objs, orphan, builders.GangPodGroup("ml", "flat", 1))
	f := newFixture(t, twoNodes, objs...)
	unitKey := f.s.unitKeys()
	for _, tc := range []struct {
		pod  *corev1.Pod
		want queue.Key
	}{
		{builders.MakePod().Namespace("ml").Name("w1-0").Member("w1").Obj(), queue.TreeKey("ml", "job")},
		{builders.MakePod().Namespace("ml").Name("o-0").Member("orphan").Obj(), queue.GroupKey("ml", "orphan")},
		{builders.MakePod().Namespace("ml").Name("f-0").Member("flat").Obj(), queue.GroupKey("ml", "flat")},
		{builders.MakePod().Namespace("ml").Name("alone").Obj(), queue.PodKey("ml", "alone")},
		{builders.MakePod().Namespace("ml").Name("w1-1").Member("w1").Obj(), queue.TreeKey("ml", "job")},
		{builders.MakePod().Namespace("ml").Name("alone-too").Obj(), queue.PodKey("ml", "alone-too")},
		// A group of the same name elsewhere is another unit.
		{builders.MakePod().Namespace("other").Name("w1-0").Member("w1").Obj(), queue.GroupKey("other", "w1")},
	} {
		if got := f.s.unitKey(tc.pod); got != tc.want {
			t.Errorf("pod %s/%s: key %v, want %v", tc.pod.Namespace, tc.pod.Name, got, tc.want)
		}
		// The loops' form remembers a group's key: the same answers,
		// asked twice through one memo.
		for i := 0; i < 2; i++ {
			if got := unitKey(tc.pod); got != tc.want {
				t.Errorf("pod %s/%s through unitKeys (%d): key %v, want %v", tc.pod.Namespace, tc.pod.Name, i, got, tc.want)
			}
		}
	}
}
