package scheduler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// twoNodes is 2 nodes × 2 GPUs (pools gpu-0 and gpu-1).
const twoNodes = `
nodePools:
- name: gpu
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
`

// oneNode is 1 node × 2 GPUs.
const oneNode = `
nodePools:
- name: gpu
  count: 1
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
`

func objects(groups ...[]runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// condition is the group's PodGroupInitiallyScheduled condition as
// "Status/Reason: message".
func condition(pg *lockv1.PodGroup) string {
	c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}

// podScheduled is a pod's PodScheduled condition as "Status/Reason: message".
func podScheduled(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return string(c.Status) + "/" + c.Reason + ": " + c.Message
		}
	}
	return ""
}

// phases checks that every claim write comes before every binding: a
// crash between them leaves claims to release, never a pod bound without
// its devices.
func phases(t *testing.T, writes []string) {
	t.Helper()
	lastClaim, firstBind := -1, len(writes)
	for i, w := range writes {
		if strings.Contains(w, "resourceclaims/status") {
			lastClaim = i
		}
		if strings.Contains(w, "pods/binding") && i < firstBind {
			firstBind = i
		}
	}
	if lastClaim > firstBind {
		t.Errorf("a claim was written after a binding:\n%s", strings.Join(writes, "\n"))
	}
}

func only(writes []string, substr string) []string {
	var out []string
	for _, w := range writes {
		if strings.Contains(w, substr) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// A gang that fits: every claim written, then every binding; the
// incarnation and the Scheduled condition recorded; Scheduled events; the
// unit leaves the queue (Done). Nothing else is written.
func TestExecuteBindsAGangThatFits(t *testing.T) {
	f := newFixture(t, twoNodes, objects(gpuPods("ml", "train", "train", 3, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 3)})...)
	k := queue.GroupKey("ml", "train")
	f.run(k)

	writes := f.writes()
	phases(t, writes)
	want := []string{
		"create pods/binding ml/train-0", "create pods/binding ml/train-1", "create pods/binding ml/train-2",
		"update resourceclaims/status ml/train-0-gpu", "update resourceclaims/status ml/train-1-gpu", "update resourceclaims/status ml/train-2-gpu",
	}
	got := append([]string(nil), writes...)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
	pg := f.group("ml", "train")
	if got, want := condition(pg), "True/Scheduled: 3 of 3 pods placed (minCount 3)"; got != want {
		t.Errorf("condition %q, want %q", got, want)
	}
	if inc := pg.Status.Incarnation; inc == nil || inc.Number != 1 || len(inc.Members) != 3 {
		t.Errorf("incarnation %+v, want number 1 with 3 members", inc)
	}
	for i := 0; i < 3; i++ {
		c := f.claim("ml", "train-"+string(rune('0'+i))+"-gpu")
		if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 {
			t.Errorf("claim %s: allocation %v, reservedFor %v", c.Name, c.Status.Allocation, c.Status.ReservedFor)
		}
	}
	if got := f.queue.of(k); got != "Done" {
		t.Errorf("queue transitions %q, want Done", got)
	}
	evs := f.drainEvents()
	if n := countPrefix(evs, "Normal Scheduled"); n != 4 {
		t.Errorf("%d Scheduled events, want 3 pods + 1 group:\n%s", n, strings.Join(evs, "\n"))
	}
}

// A gang whose minCount fits but not all of its members: the 3 that fit
// bind, the 4th stays pending with its own Unschedulable condition; the
// group is Scheduled (upstream: "minCount is scheduled, but one pod
// remains unschedulable"); the unit is parked to retry the 4th.
func TestExecuteBindsWhatFitsBeyondMinCount(t *testing.T) {
	busy := running(gpuPods("other", "", "busy", 1, 0), "gpu-0", 0)
	f := newFixture(t, twoNodes, objects(busy, gpuPods("ml", "elastic", "elastic", 4, 0), []runtime.Object{builders.GangPodGroup("ml", "elastic", 2)})...)
	k := queue.GroupKey("ml", "elastic")
	f.run(k)

	writes := f.writes()
	phases(t, writes)
	if n := len(only(writes, "pods/binding")); n != 3 {
		t.Errorf("%d bindings, want 3:\n%s", n, strings.Join(writes, "\n"))
	}
	var pending []*corev1.Pod
	for i := 0; i < 4; i++ {
		if p := f.pod("ml", "elastic-"+string(rune('0'+i))); p.Spec.NodeName == "" {
			pending = append(pending, p)
		}
	}
	if len(pending) != 1 {
		t.Fatalf("%d members pending, want 1", len(pending))
	}
	if got, want := podScheduled(pending[0]), "False/Unschedulable: PodGroup elastic has reached minCount 2; this pod joins it when it fits: no free device of class gpu.example.com"; got != want {
		t.Errorf("pending member's condition %q, want %q", got, want)
	}
	pg := f.group("ml", "elastic")
	if got, want := condition(pg), "True/Scheduled: 3 of 4 pods placed (minCount 2)"; got != want {
		t.Errorf("condition %q, want %q", got, want)
	}
	if inc := pg.Status.Incarnation; inc == nil || len(inc.Members) != 3 {
		t.Errorf("incarnation %+v, want the 3 bound members", inc)
	}
	if got := f.queue.of(k); got != "Unschedulable" {
		t.Errorf("queue transitions %q, want Unschedulable (the 4th member retries)", got)
	}
}

// A running gang whose member created after it was placed does not fit:
// the group stays Scheduled and its counts take the new member in (its
// condition said "2 of 2" from the placement that saw only 2); nothing
// binds, the member says why, and an unchanged retry writes nothing.
func TestExecuteRecountsARunningGangsLateMember(t *testing.T) {
	gang := running(gpuPods("ml", "elastic", "elastic", 2, 0), "gpu-0", 0)
	pg := builders.GangPodGroup("ml", "elastic", 2)
	pg.Status.Conditions = []metav1.Condition{{Type: lockv1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: lockv1.PodGroupReasonScheduled, Message: "2 of 2 pods placed (minCount 2)"}}
	f := newFixture(t, oneNode, objects(gang, gpuPods("ml", "elastic", "late", 1, 0), []runtime.Object{pg})...)
	k := queue.GroupKey("ml", "elastic")
	f.run(k)

	if w := only(f.writes(), "pods/binding"); len(w) != 0 {
		t.Errorf("bindings %v, want none: no GPU is free", w)
	}
	if got, want := condition(f.group("ml", "elastic")), "True/Scheduled: 2 of 3 pods placed (minCount 2)"; got != want {
		t.Errorf("condition %q, want %q", got, want)
	}
	if got := podScheduled(f.pod("ml", "late-0")); !strings.HasPrefix(got, "False/Unschedulable: PodGroup elastic has reached minCount 2") {
		t.Errorf("late member's condition %q, want Unschedulable beyond minCount", got)
	}
	f.drainEvents()
	n := len(f.writes())
	f.run(k)
	if w := f.writes()[n:]; len(w) != 0 {
		t.Errorf("an unchanged retry wrote %v", w)
	}
}

// A gang with fewer members than minCount waits: the group says so, no
// pod or claim is written, and the unit waits for its pods.
func TestExecuteWaitsForPods(t *testing.T) {
	f := newFixture(t, twoNodes, objects(gpuPods("ml", "forming", "forming", 2, 0), []runtime.Object{builders.GangPodGroup("ml", "forming", 3)})...)
	k := queue.GroupKey("ml", "forming")
	f.run(k)
	if w := f.writes(); len(w) != 0 {
		t.Errorf("a waiting gang wrote %v", w)
	}
	if got, want := condition(f.group("ml", "forming")), "False/WaitingForPods: waiting for pods: fewer than minCount 3 members exist; none is placed until 3 do"; got != want {
		t.Errorf("condition %q, want %q", got, want)
	}
	if got := f.queue.of(k); got != "Wait" {
		t.Errorf("queue transitions %q, want Wait", got)
	}
}

// A waiting cycle that was dear (a gang of thousands reading its members
// as each arrives) brings its unit back at a bounded pace: an event right
// after it does not, one waitGap after it does. TestExecuteWaitsForPods is
// the cheap cycle, which comes back at once.
func TestExecuteDearWaitIsPaced(t *testing.T) {
	f := newFixture(t, twoNodes, objects(gpuPods("ml", "forming", "forming", 2, 0), []runtime.Object{builders.GangPodGroup("ml", "forming", 3)})...)
	k := queue.GroupKey("ml", "forming")
	// The cycle takes 40ms: its condition's write does.
	f.dyn.PrependReactor("update", "podgroups", func(clienttesting.Action) (bool, runtime.Object, error) {
		f.clock.Step(40 * time.Millisecond)
		return false, nil, nil
	})
	// As the loop runs it: popped, so the queue sees the cycle end.
	f.waitFor("the unit queued", func() bool { a, _ := f.queue.Len(); return a == 1 })
	it, _ := f.queue.Pop(f.ctx)
	if it.Key != k {
		t.Fatalf("popped %v, want %v", it.Key, k)
	}
	f.s.scheduleOne(f.ctx, it)
	if got := f.queue.of(k); got != "WaitPaced" {
		t.Fatalf("queue transitions %q, want WaitPaced", got)
	}
	f.queue.Add(k) // its third member arrives
	if a, _ := f.queue.Len(); a != 0 {
		t.Errorf("an event right after a dear waiting cycle: want it parked, got %d active", a)
	}
	f.clock.Step(waitGap(40*time.Millisecond) - time.Millisecond)
	if a, _ := f.queue.Len(); a != 0 {
		t.Errorf("before its gap ends: want it parked, got %d active", a)
	}
	f.clock.Step(time.Millisecond)
	if a, _ := f.queue.Len(); a != 1 {
		t.Errorf("when its gap ends: want it active, got %d", a)
	}
}

// A gang whose members are all gated (how Kueue holds a pod group) says
// why on its condition, naming the gates and the ClusterQueue whose
// admission it waits for — with or without the placement check, and in
// the LocalQueue's name, with why, when the ClusterQueue cannot be read;
// nothing else is written (its pods are never Unschedulable).
func TestExecuteAllGatedGangSaysWhy(t *testing.T) {
	const gated = ": 2 members are gated (spec.schedulingGates: kueue.x-k8s.io/admission); none is placed until minCount 2 are ungated"
	cases := map[string]struct {
		api   fixtureAPI
		queue string // the pods' kueue.x-k8s.io/queue-name
		objs  []runtime.Object
		want  string
	}{
		"its LocalQueue's ClusterQueue": {
			api: fixtureAPI{kueue: true}, queue: "team", objs: []runtime.Object{localQueue("ml", "team", "gpus")},
			want: "waiting for Kueue admission in ClusterQueue gpus (LocalQueue ml/team)" + gated,
		},
		"no LocalQueue named": {
			api:  fixtureAPI{kueue: true},
			want: "waiting for Kueue admission" + gated,
		},
		"a LocalQueue that does not exist": {
			api: fixtureAPI{kueue: true}, queue: "team",
			want: "waiting for Kueue admission in LocalQueue ml/team, which does not exist: create it, or name an existing LocalQueue in the label kueue.x-k8s.io/queue-name" + gated,
		},
		"Kueue's API not served": {
			queue: "team",
			want:  "waiting for Kueue admission in LocalQueue ml/team (its ClusterQueue could not be read: the API server does not serve localqueues.kueue.x-k8s.io)" + gated,
		},
		"LocalQueues the scheduler may not list": {
			api: fixtureAPI{kueue: true, forbidLocalQueues: true}, queue: "team", objs: []runtime.Object{localQueue("ml", "team", "gpus")},
			want: `waiting for Kueue admission in LocalQueue ml/team (its ClusterQueue could not be read: the scheduler may not list LocalQueues (grant it list and watch on localqueues.kueue.x-k8s.io): localqueues.kueue.x-k8s.io is forbidden: User "lockstep-scheduler" cannot list resource "localqueues")` + gated,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.api.lockstep = []string{"podgroups", "compositepodgroups", "workloads"}
			f := newFixtureAPI(t, twoNodes, tc.api, objects(kueueHeld("ml", "held", tc.queue, 2), append(tc.objs, builders.GangPodGroup("ml", "held", 2)))...)
			k := queue.GroupKey("ml", "held")
			f.run(k)
			if w := f.writes(); len(w) != 0 {
				t.Errorf("a gated gang wrote %v", w)
			}
			if diff := cmp.Diff("False/SchedulingGated: "+tc.want, condition(f.group("ml", "held"))); diff != "" {
				t.Errorf("condition (-want,+got):\n%s", diff)
			}
			if got := f.queue.of(k); got != "Wait" {
				t.Errorf("queue transitions %q, want Wait", got)
			}
		})
	}
}

// A LocalQueue created after a gang it holds was judged brings the gang
// back, its words naming the ClusterQueue now.
func TestExecuteGatedGangFollowsItsLocalQueue(t *testing.T) {
	f := newFixtureAPI(t, twoNodes, fixtureAPI{lockstep: []string{"podgroups", "compositepodgroups", "workloads"}, kueue: true},
		objects(kueueHeld("ml", "held", "team", 2), []runtime.Object{builders.GangPodGroup("ml", "held", 2)})...)
	k := queue.GroupKey("ml", "held")
	for active, _ := f.queue.Len(); active > 0; active, _ = f.queue.Len() {
		f.queue.Pop(f.ctx) // the informers' adds: the test runs the cycles
	}
	f.run(k)
	if got := condition(f.group("ml", "held")); !strings.Contains(got, "LocalQueue ml/team, which does not exist") {
		t.Fatalf("condition %q, want the missing LocalQueue named", got)
	}
	if _, err := f.dyn.Resource(kueuecheck.LocalQueueResource).Namespace("ml").Create(f.ctx, localQueue("ml", "team", "gpus"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the gang queued again", func() bool { active, _ := f.queue.Len(); return active == 1 })
	if it, _ := f.queue.Pop(f.ctx); it.Key != k {
		t.Fatalf("queued %v, want %v", it.Key, k)
	}
	f.run(k)
	if got := condition(f.group("ml", "held")); !strings.HasPrefix(got, "False/SchedulingGated: waiting for Kueue admission in ClusterQueue gpus (LocalQueue ml/team): 2 members are gated") {
		t.Errorf("condition %q, want the ClusterQueue named", got)
	}
}

// kueueHeld are n pods of group held by Kueue's admission gate, naming
// LocalQueue queue ("": none).
func kueueHeld(ns, group, queue string, n int) []runtime.Object {
	objs := gpuPods(ns, group, group, n, 0)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: podgroup.KueueAdmissionGate}}
			if queue != "" {
				p.Labels[podgroup.KueueQueueLabel] = queue
			}
		}
	}
	return objs
}

// localQueue is Kueue LocalQueue ns/name feeding ClusterQueue cq.
func localQueue(ns, name, cq string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueuecheck.LocalQueueResource.GroupVersion().String(), "kind": "LocalQueue",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"clusterQueue": cq},
	}}
}

// A gang that does not fit and cannot preempt: every member says so, the
// group is Unschedulable with the arithmetic, nothing is allocated, and
// the unit is parked with backoff.
func TestExecuteUnschedulableGang(t *testing.T) {
	f := newFixture(t, twoNodes, objects(gpuPods("ml", "big", "big", 5, 0), []runtime.Object{builders.GangPodGroup("ml", "big", 5)})...)
	k := queue.GroupKey("ml", "big")
	f.run(k)
	writes := f.writes()
	if got := only(writes, "pods/status"); len(got) != 5 || len(got) != len(writes) {
		t.Errorf("writes %v, want only the 5 members' status", writes)
	}
	for i := 0; i < 5; i++ {
		p := f.pod("ml", "big-"+string(rune('0'+i)))
		// No count in a member's message: it would be rewritten on every
		// member as capacity changes; the group's condition has them.
		if got, want := podScheduled(p), "False/Unschedulable: PodGroup big: minCount 5 not satisfiable: no free device of class gpu.example.com (the PodGroup's PodGroupInitiallyScheduled condition has the arithmetic)"; got != want {
			t.Errorf("%s: condition %q, want %q", p.Name, got, want)
		}
	}
	if got := condition(f.group("ml", "big")); !strings.HasPrefix(got, "False/Unschedulable: minCount 5 not satisfiable: at most 4 of 5 pods fit") {
		t.Errorf("condition %q", got)
	}
	if got := f.queue.of(k); got != "Unschedulable" {
		t.Errorf("queue transitions %q, want Unschedulable", got)
	}
	// The same cycle again writes nothing new: a unit retried for an hour
	// does not rewrite its members.
	f.client.ClearActions()
	f.waitFor("the members' conditions in the cache", func() bool {
		for i := 0; i < 5; i++ {
			p, err := f.s.listers.pods.Pods("ml").Get("big-" + string(rune('0'+i)))
			if err != nil || podScheduled(p) == "" {
				return false
			}
		}
		return true
	})
	f.run(k)
	if w := f.writes(); len(w) != 0 {
		t.Errorf("an unchanged verdict rewrote %v", w)
	}
}

// A higher-priority gang that needs a running lower-priority gang's
// devices: the victims are marked DisruptionTarget and deleted, the
// victim group's incarnation ends (PreemptionByScheduler), the preemptor
// is nominated (status.nominatedNodeName, and held in the cache), and it
// waits for its victims (WaitFor).
func TestExecutePreempts(t *testing.T) {
	low := running(gpuPods("batch", "low", "low", 2, 10), "gpu-0", 0)
	lowGroup := builders.GangPodGroup("batch", "low", 2)
	lowGroup.Status.Incarnation = &lockv1.PodGroupIncarnation{Number: 1, MinCount: 2, Members: []lockv1.PodGroupMember{{Name: "low-0", UID: "batch-low-0"}, {Name: "low-1", UID: "batch-low-1"}}}
	f := newFixture(t, oneNode, objects(low, gpuPods("ml", "urgent", "urgent", 2, 100), []runtime.Object{lowGroup, builders.GangPodGroup("ml", "urgent", 2)})...)
	k := queue.GroupKey("ml", "urgent")
	f.run(k)

	writes := f.writes()
	for _, want := range []string{"delete pods batch/low-0", "delete pods batch/low-1", "update pods/status batch/low-0", "update pods/status batch/low-1", "patch pods/status ml/urgent-0", "patch pods/status ml/urgent-1"} {
		if !slices.Contains(writes, want) {
			t.Errorf("missing %q in writes:\n%s", want, strings.Join(writes, "\n"))
		}
	}
	if n := len(only(writes, "pods/binding")); n != 0 {
		t.Errorf("%d bindings while the victims are going", n)
	}
	for _, n := range []string{"urgent-0", "urgent-1"} {
		if p := f.pod("ml", n); p.Status.NominatedNodeName != "gpu-0" {
			t.Errorf("%s: nominatedNodeName %q, want gpu-0", n, p.Status.NominatedNodeName)
		}
	}
	if nom := f.s.state.Cache.Nomination(k.String()); nom == nil || nom.Priority != 100 || len(nom.Pods) != 2 || len(nom.Victims) != 2 {
		t.Errorf("nomination %+v, want priority 100 for 2 pods with 2 victims", nom)
	}
	if inc := f.group("batch", "low").Status.Incarnation; inc == nil || inc.Ended == nil || inc.Ended.Reason != lockv1.PodGroupReasonPreemption {
		t.Errorf("victim incarnation %+v, want ended by preemption", inc)
	}
	if got := f.queue.of(k); got != "WaitFor" {
		t.Errorf("queue transitions %q, want WaitFor", got)
	}
}

// A unit that cannot be evaluated (a claim of a DeviceClass that does not
// exist) is a SchedulerError: the group says so, nothing is allocated, and
// the unit is retried with backoff.
func TestExecuteErrorRetries(t *testing.T) {
	objs := gpuPods("ml", "broken", "broken", 1, 0)
	for i, o := range objs {
		if c, ok := o.(*resourcev1.ResourceClaim); ok {
			bad := builders.Claim("ml", c.Name, "no-such-class.example.com", 1)
			bad.OwnerReferences = c.OwnerReferences
			objs[i] = bad
		}
	}
	f := newFixture(t, twoNodes, objects(objs, []runtime.Object{builders.GangPodGroup("ml", "broken", 1)})...)
	k := queue.GroupKey("ml", "broken")
	f.run(k)
	if n := len(only(f.writes(), "resourceclaims")); n != 0 {
		t.Errorf("%d claim writes for a unit that could not be evaluated", n)
	}
	if got := condition(f.group("ml", "broken")); !strings.HasPrefix(got, "False/SchedulerError: scheduler error:") {
		t.Errorf("condition %q, want SchedulerError", got)
	}
	if got := f.queue.of(k); got != "Retry" {
		t.Errorf("queue transitions %q, want Retry", got)
	}
}

// A binding that fails part way: the pods bound stay bound and are
// recorded in the incarnation; the claim of the pod that failed is
// released (reservation and allocation), so no device is held for a pod
// that is not bound; the group reports the error and the unit retries.
func TestExecuteFailedBindingReleasesWhatDidNotBind(t *testing.T) {
	f := newFixture(t, twoNodes, objects(gpuPods("ml", "train", "train", 2, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 2)})...)
	f.failBind["train-1"] = true
	k := queue.GroupKey("ml", "train")
	f.run(k)

	if p := f.pod("ml", "train-0"); p.Spec.NodeName == "" {
		t.Errorf("train-0 is not bound")
	}
	if p := f.pod("ml", "train-1"); p.Spec.NodeName != "" {
		t.Errorf("train-1 is bound although its binding failed")
	}
	if c := f.claim("ml", "train-1-gpu"); c.Status.Allocation != nil || len(c.Status.ReservedFor) != 0 {
		t.Errorf("train-1's claim still holds %v reserved for %v", c.Status.Allocation, c.Status.ReservedFor)
	}
	if c := f.claim("ml", "train-0-gpu"); c.Status.Allocation == nil {
		t.Errorf("train-0's claim lost its allocation")
	}
	pg := f.group("ml", "train")
	if inc := pg.Status.Incarnation; inc == nil || len(inc.Members) != 1 || inc.Members[0].Name != "train-0" {
		t.Errorf("incarnation %+v, want train-0 recorded", inc)
	}
	if got := condition(pg); !strings.HasPrefix(got, "False/SchedulerError: scheduler error: binding 1 of 2 pods failed") {
		t.Errorf("condition %q", got)
	}
	if got := f.queue.of(k); got != "Retry" {
		t.Errorf("queue transitions %q, want Retry", got)
	}
}

func countPrefix(ss []string, prefix string) int {
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// When capacity changes but the gang still does not fit, only the group's
// condition (which carries the counts) is rewritten: no member is written
// again, however many members the gang has.
func TestCapacityChangeRewritesOnlyTheGroup(t *testing.T) {
	busy := running(gpuPods("other", "", "busy", 1, 1000), "gpu-0", 0)
	f := newFixture(t, twoNodes, objects(busy, gpuPods("ml", "big", "big", 5, 0), []runtime.Object{builders.GangPodGroup("ml", "big", 5)})...)
	k := queue.GroupKey("ml", "big")
	f.run(k)
	if got := condition(f.group("ml", "big")); !strings.Contains(got, "at most 3 of 5 pods fit") {
		t.Fatalf("condition %q, want at most 3 of 5", got)
	}
	f.waitFor("the members' conditions in the cache", func() bool {
		for i := 0; i < 5; i++ {
			p, err := f.s.listers.pods.Pods("ml").Get("big-" + string(rune('0'+i)))
			if err != nil || podScheduled(p) == "" {
				return false
			}
		}
		return true
	})
	if err := f.client.CoreV1().Pods("other").Delete(f.ctx, "busy-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := f.claim("other", "busy-0-gpu")
	c.Status = resourcev1.ResourceClaimStatus{}
	if _, err := f.client.ResourceV1().ResourceClaims("other").UpdateStatus(f.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the freed device in the cache", func() bool {
		return f.s.state.Snapshot(f.ctx, "none", 0).Node("gpu-0").FreeDevices() == 2
	})
	f.client.ClearActions()
	f.run(k)
	if w := only(f.writes(), "pods"); len(w) != 0 {
		t.Errorf("members rewritten after a capacity change: %v", w)
	}
	if got := condition(f.group("ml", "big")); !strings.Contains(got, "at most 4 of 5 pods fit") {
		t.Errorf("condition %q, want at most 4 of 5", got)
	}
}

// The members' conditions a cycle writes come back as pod updates: they
// must leave the unit parked in its backoff, not decide it again once per
// member ahead of younger units (issue 28: a huge gang's own writes kept
// it first in the queue).
func TestOwnStatusWritesLeaveTheUnitParked(t *testing.T) {
	f := newFixture(t, twoNodes, objects(gpuPods("ml", "big", "big", 5, 0), []runtime.Object{builders.GangPodGroup("ml", "big", 5)})...)
	k := queue.GroupKey("ml", "big")
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer cancel()
	it, ok := f.queue.Pop(ctx)
	if !ok || it.Key != k {
		t.Fatalf("popped %v (%v), want %v", it.Key, ok, k)
	}
	f.run(k)
	f.waitFor("the members' conditions in the cache", func() bool {
		for i := 0; i < 5; i++ {
			p, err := f.s.listers.pods.Pods("ml").Get("big-" + string(rune('0'+i)))
			if err != nil || podScheduled(p) == "" {
				return false
			}
		}
		return true
	})
	time.Sleep(100 * time.Millisecond) // the handlers ran after the cache took the updates
	if active, parked := f.queue.Len(); active != 0 || parked != 1 {
		t.Errorf("after its members' conditions were written: %d active, %d parked; want the unit parked", active, parked)
	}
}
