package integrity

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// step is one event in a scenario and what must hold after the controller
// has reacted to it.
type step struct {
	name string
	do   func(w *world)
	// want, after decide():
	restarts    int    // restarts recorded so far
	reason      string // reason of the last restart, if restarts > 0
	state       string // Running condition reason
	incarnation int32
	evictions   int // pods evicted so far
	requeue     bool
}

func TestDecideSequences(t *testing.T) {
	running := lockv1.RunningReasonRunning
	cases := map[string]struct {
		minCount int32
		job      bool
		single   bool
		steps    []step
	}{
		"ranks of a Job that finish at different times complete it, never restart it": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "rank 0 exits 0", do: func(w *world) { w.advance(15 * time.Second); w.succeed(0) }, state: running, incarnation: 1},
				{name: "rank 1 exits 0 and its pod is deleted before a verdict saw it finish", do: func(w *world) {
					p := w.rank(1)
					p.Status.Phase = corev1.PodSucceeded
					w.gone(p)
				}, state: running, incarnation: 1},
				{name: "ranks 2 and 3 exit 0", do: func(w *world) { w.succeed(2); w.succeed(3) }, state: lockv1.RunningReasonCompleted, incarnation: 1},
			},
		},
		"a gang of bare pods that finish at different times completes": {
			minCount: 3,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 3); w.bind() }, state: running, incarnation: 1},
				{name: "rank 2 exits 0", do: func(w *world) { w.succeed(2) }, state: running, incarnation: 1},
				{name: "the rest exit 0", do: func(w *world) { w.succeed(0); w.succeed(1) }, state: lockv1.RunningReasonCompleted, incarnation: 1},
			},
		},
		"a gang bound but not yet recorded is not judged": {
			minCount: 4, job: true,
			steps: []step{
				{name: "pods wait a minute, then bind without a record yet", do: func(w *world) {
					w.create(0, 4)
					w.advance(time.Minute)
					for _, p := range w.pods {
						p.Spec.NodeName, p.Status.Phase = "node-0", corev1.PodRunning
					}
				}, state: lockv1.RunningReasonPending},
				{name: "the record arrives", do: func(w *world) {
					w.pg.Status.Incarnation = podgroup.Record(nil, 4, w.sorted(), nil, metav1.NewTime(w.now))
				}, state: running, incarnation: 1},
			},
		},
		"members recorded before this cache has seen their pods are bound, not gone": {
			minCount: 2, job: true,
			steps: []step{
				{name: "recorded; the pods not in the cache yet", do: func(w *world) {
					w.create(0, 2)
					w.bind()
					w.hidden = w.sorted()
					w.pods = map[string]*corev1.Pod{}
				}, state: running, incarnation: 1, requeue: true},
				{name: "the cache catches up", do: func(w *world) {
					w.advance(time.Second)
					for _, p := range w.hidden {
						w.pods[p.Name] = p
					}
				}, state: running, incarnation: 1},
			},
		},
		"a recorded member never seen and never deleted is lost after the settle time": {
			minCount: 2, job: true,
			steps: []step{
				{name: "recorded; one pod never appears", do: func(w *world) { w.create(0, 2); w.bind(); delete(w.pods, w.rank(1).Name) }, state: running, incarnation: 1, requeue: true},
				{name: "settle time over", do: func(w *world) { w.advance(6 * time.Second) }, restarts: 1, reason: ReasonMemberLost, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 1},
			},
		},
		"a binding that failed part way is completed by the next cycle within the settle time": {
			minCount: 4, job: true,
			steps: []step{
				{name: "2 of 4 bound", do: func(w *world) { w.create(0, 4); w.bind(0, 1) }, state: running, incarnation: 1, requeue: true},
				{name: "the rest bound a second later", do: func(w *world) { w.advance(time.Second); w.bind() }, state: running, incarnation: 1},
			},
		},
		"a binding that failed part way and is never completed restarts": {
			minCount: 4, job: true,
			steps: []step{
				{name: "2 of 4 bound, the others deleted", do: func(w *world) { w.create(0, 4); w.bind(0, 1); w.remove(2); w.remove(3) }, state: running, incarnation: 1, requeue: true},
				{name: "settle time over", do: func(w *world) { w.advance(6 * time.Second) }, restarts: 1, reason: ReasonMemberLost, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 2},
			},
		},
		"a failed member restarts the gang once; its lingering pod never counts against the next incarnation": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "rank 2 fails", do: func(w *world) { w.fail(2) }, restarts: 1, reason: ReasonMemberFailed, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 3},
				{name: "controller runs again before the evictions finish", do: func(w *world) {}, restarts: 1, reason: ReasonMemberFailed, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 3},
				{name: "evicted pods go, the Job recreates all 4 and they bind", do: func(w *world) { w.terminate(); w.create(0, 4); w.bind() }, restarts: 1, reason: ReasonMemberFailed, state: running, incarnation: 2, evictions: 3},
				{name: "a minute later", do: func(w *world) { w.advance(time.Minute) }, restarts: 1, reason: ReasonMemberFailed, state: running, incarnation: 2, evictions: 3},
			},
		},
		"an interrupted restart is finished from the record after a controller restart, not counted twice": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "the record says ended, no member was evicted yet", do: func(w *world) {
					w.fail(0)
					w.pg.Status.Incarnation.Ended = &lockv1.PodGroupIncarnationEnd{Reason: ReasonMemberFailed, Message: "pod failed", Time: metav1.NewTime(w.now)}
				}, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 3},
			},
		},
		"a node interruption the scheduler recorded restarts the gang whole": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "its node is interrupted", do: func(w *world) {
					w.pg.Status.Incarnation.Ended = &lockv1.PodGroupIncarnationEnd{Reason: lockv1.PodGroupReasonNodeInterrupted, Message: "node n0 is being interrupted (taint aws-node-termination-handler/spot-itn)", Time: metav1.NewTime(w.now)}
				}, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 4},
			},
		},
		"a preemption by the scheduler is recorded once, by the scheduler, and is no loss": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "preempted whole", do: func(w *world) { w.preempt() }, state: lockv1.RunningReasonPreempted, incarnation: 1},
				{name: "victims gone", do: func(w *world) { w.terminate() }, state: lockv1.RunningReasonPreempted, incarnation: 1},
				{name: "placed again", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 2},
			},
		},
		"victims marked by the scheduler before its record landed are no loss": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "two victims marked and deleting", do: func(w *world) {
					for _, i := range []int{0, 1} {
						p := w.rank(i)
						podgroup.SetPodCondition(p, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler})
						p.DeletionTimestamp = ptr.To(metav1.NewTime(w.now))
					}
				}, state: running, incarnation: 1},
				{name: "long after", do: func(w *world) { w.advance(time.Minute) }, state: running, incarnation: 1},
			},
		},
		"a deleted node restarts the gang": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "node-1 deleted", do: func(w *world) { delete(w.nodes, "node-1") }, restarts: 1, reason: ReasonNodeLost, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 4},
			},
		},
		"a deleted node whose pods vanish at once (the simulator deletes them) is a node loss": {
			minCount: 2, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 2); w.bind() }, state: running, incarnation: 1},
				{name: "node-1 deleted with its pod", do: func(w *world) { delete(w.nodes, "node-1"); w.remove(1) }, restarts: 1, reason: ReasonNodeLost, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 1},
			},
		},
		"a rank that succeeded before a node loss counts toward the next incarnation": {
			minCount: 3, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 3); w.bind() }, state: running, incarnation: 1},
				{name: "rank 2 exits 0", do: func(w *world) { w.succeed(2) }, state: running, incarnation: 1},
				{name: "node-0 deleted", do: func(w *world) { delete(w.nodes, "node-0") }, restarts: 1, reason: ReasonNodeLost, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 2},
				{name: "ranks 0 and 1 recreated and bound", do: func(w *world) {
					w.terminate()
					w.nodes["node-0"] = w.nodes["node-1"].DeepCopy()
					w.create(0, 2)
					w.bind()
				}, restarts: 1, reason: ReasonNodeLost, state: running, incarnation: 2, evictions: 2},
				{name: "settle time over", do: func(w *world) { w.advance(10 * time.Second) }, restarts: 1, reason: ReasonNodeLost, state: running, incarnation: 2, evictions: 2},
			},
		},
		"a NotReady node restarts the gang only past the grace period": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "node-2 NotReady", do: func(w *world) {
					w.nodes["node-2"].Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(w.now)}
				}, state: running, incarnation: 1, requeue: true},
				{name: "Ready again within the grace", do: func(w *world) {
					w.advance(20 * time.Second)
					w.nodes["node-2"].Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.now)}
				}, state: running, incarnation: 1},
				{name: "NotReady again, past the grace", do: func(w *world) {
					w.nodes["node-2"].Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(w.now)}
					w.advance(41 * time.Second)
				}, restarts: 1, reason: ReasonNodeLost, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 4},
			},
		},
		"scaling a gang Job up never restarts the ranks that stay; the added ones bind together": {
			minCount: 2, job: true,
			steps: []step{
				{name: "2 ranks bound", do: func(w *world) { w.create(0, 2); w.bind() }, state: running, incarnation: 1},
				{name: "parallelism 2 → 6: 4 new ranks wait", do: func(w *world) { w.resize(6); w.create(2, 6) }, state: running, incarnation: 1},
				{name: "they wait three minutes", do: func(w *world) { w.advance(3 * time.Minute) }, state: running, incarnation: 1},
				{name: "they bind together", do: func(w *world) { w.bind() }, state: running, incarnation: 1},
			},
		},
		"scaling a gang Job down removes ranks, never restarts the ones that stay": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "completions 4 → 2: the Job deletes ranks 2 and 3 before minCount follows", do: func(w *world) {
					w.completions = 2
					w.deleting(2)
					w.deleting(3)
				}, state: running, incarnation: 1},
				{name: "minCount follows, the pods go", do: func(w *world) { w.resize(2); w.terminate() }, state: running, incarnation: 1},
				{name: "scaled up again to 4: new ranks 2, 3 bind", do: func(w *world) { w.resize(4); w.create(2, 4); w.bind() }, state: running, incarnation: 1},
			},
		},
		"an owner scaled by count (a Ray cluster's workers) deleting pods down to its new size removes them, never restarts": {
			minCount: 2, job: true,
			steps: []step{
				{name: "4 bound, the owner wants 4", do: func(w *world) { w.completions = 4; w.owner.Size = 4; w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "the owner wants 2 and deletes 2", do: func(w *world) { w.owner.Size = 2; w.deleting(2); w.deleting(3) }, state: running, incarnation: 1},
				{name: "the pods go", do: func(w *world) { w.terminate() }, state: running, incarnation: 1},
			},
		},
		"an owner scaled by count losing a pod it still wants restarts the gang": {
			minCount: 2, job: true,
			steps: []step{
				{name: "4 bound, the owner wants 4", do: func(w *world) { w.completions = 4; w.owner.Size = 4; w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "a pod deleted", do: func(w *world) { w.remove(3) }, restarts: 1, reason: ReasonMemberLost, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 3},
			},
		},
		"bare pods: lowering minCount and deleting the extra pods is a scale-down": {
			minCount: 4,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "minCount 4 → 2, two pods deleted", do: func(w *world) { w.resize(2); w.remove(2); w.remove(3) }, state: running, incarnation: 1},
			},
		},
		"bare pods: deleting a pod of a gang is a loss, and nothing recreates bare pods": {
			minCount: 4,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "one pod deleted", do: func(w *world) { w.remove(1) }, restarts: 1, reason: ReasonMemberLost, state: lockv1.RunningReasonFailed, incarnation: 1, evictions: 3},
			},
		},
		"evictions by the node taint manager and the device taint manager are named by cause": {
			minCount: 2, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 2); w.bind() }, state: running, incarnation: 1},
				{name: "device taint manager evicts rank 1", do: func(w *world) {
					p := w.rank(1)
					podgroup.SetPodCondition(p, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reasonDeviceTaintManager})
					p.DeletionTimestamp = ptr.To(metav1.NewTime(w.now))
				}, restarts: 1, reason: ReasonDeviceFailed, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 1},
			},
		},
		"a suspended owner takes its pods down: no loss; resumed, it runs a new incarnation": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "suspended: the Job deletes its pods", do: func(w *world) {
					w.owner.Stopped, w.owner.Suspended = "suspended", true
					for i := 0; i < 4; i++ {
						w.deleting(i)
					}
				}, state: lockv1.RunningReasonSuspended, incarnation: 1},
				{name: "pods gone; resumed", do: func(w *world) { w.terminate(); w.owner.Stopped, w.owner.Suspended = "", false }, state: lockv1.RunningReasonPending, incarnation: 1},
				{name: "recreated and bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 2},
			},
		},
		"a Job that failed is not restarted": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "the Job failed and a rank with it", do: func(w *world) {
					w.owner.Stopped, w.owner.Failed = "failed: BackoffLimitExceeded", true
					w.fail(1)
				}, state: lockv1.RunningReasonFailed, incarnation: 1},
			},
		},
		"device health Unknown (a driver missed an update) and back: the gang runs on": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "every GPU reported Healthy", do: func(w *world) {
					for i := 0; i < 4; i++ {
						w.health(i, corev1.ResourceHealthStatusHealthy)
					}
				}, state: running, incarnation: 1},
				{name: "rank 2's GPU turns Unknown", do: func(w *world) { w.health(2, corev1.ResourceHealthStatusUnknown) }, state: running, incarnation: 1},
				{name: "a minute later it is still Unknown", do: func(w *world) { w.advance(time.Minute) }, state: running, incarnation: 1},
				{name: "and Healthy again", do: func(w *world) { w.health(2, corev1.ResourceHealthStatusHealthy) }, state: running, incarnation: 1},
			},
		},
		"a device reported Unhealthy restarts the whole gang": {
			minCount: 4, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "rank 1's GPU turns Unhealthy", do: func(w *world) { w.health(1, corev1.ResourceHealthStatusUnhealthy) },
					restarts: 1, reason: ReasonDeviceUnhealthy, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 4},
			},
		},
		"a rank that failed on an Unhealthy device is a DeviceUnhealthy loss, not MemberFailed": {
			minCount: 2, job: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 2); w.bind() }, state: running, incarnation: 1},
				{name: "rank 0 crashes on its Unhealthy GPU", do: func(w *world) { w.health(0, corev1.ResourceHealthStatusUnhealthy); w.fail(0) },
					restarts: 1, reason: ReasonDeviceUnhealthy, state: lockv1.RunningReasonRestarting, incarnation: 1, evictions: 1},
			},
		},
		"a member a user deletes, stopped by SIGTERM (exit 143) before it goes, was lost, not failed": {
			minCount: 4,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "rank 0 deleted, its container exits 143", do: func(w *world) { w.exit(0, 143, true) },
					restarts: 1, reason: ReasonMemberLost, state: lockv1.RunningReasonFailed, incarnation: 1, evictions: 3},
			},
		},
		"a member that exited 1 while being deleted failed on its own": {
			minCount: 4,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "rank 0 deleted, its container exits 1", do: func(w *world) { w.exit(0, 1, true) },
					restarts: 1, reason: ReasonMemberFailed, state: lockv1.RunningReasonFailed, incarnation: 1, evictions: 3},
			},
		},
		"disruptionMode single: the member on an Unhealthy device is taken down alone, once": {
			minCount: 4, job: true, single: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "rank 3's GPU turns Unhealthy", do: func(w *world) { w.health(3, corev1.ResourceHealthStatusUnhealthy) }, state: running, incarnation: 1, evictions: 1},
				{name: "a later pass", do: func(w *world) { w.advance(time.Second) }, state: running, incarnation: 1, evictions: 1},
			},
		},
		"disruptionMode single: a lost member is reported, the rest keep running": {
			minCount: 4, job: true, single: true,
			steps: []step{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "rank 3 fails", do: func(w *world) { w.fail(3) }, state: running, incarnation: 1},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.minCount, tc.job)
			if tc.single {
				w.pg.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
			}
			for _, s := range tc.steps {
				s.do(w)
				vd := w.decide()
				got := step{name: s.name, restarts: len(w.restarts), state: w.state(), incarnation: w.incarnation(), evictions: w.evictions, requeue: vd.RequeueAfter > 0}
				if len(w.restarts) > 0 {
					got.reason = w.restarts[len(w.restarts)-1].Reason
				}
				want := s
				want.do = nil
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(step{})); diff != "" {
					t.Fatalf("after %q (-want,+got):\n%s\nRunning: %+v", s.name, diff, w.pg.Status.Conditions)
				}
				// A verdict depends on the view alone: deciding again on
				// the same state (a controller restart) changes nothing.
				if again, _ := Confirmed(w.view(), w.read); again.Restart != nil || len(again.Evict) != countUnevicted(vd) {
					t.Fatalf("after %q: a second decision on the same state differs: restart %v, evict %d", s.name, again.Restart, len(again.Evict))
				}
			}
		})
	}
}

// countUnevicted: what a repeated decision may still evict — nothing once
// the first verdict's evictions were applied.
func countUnevicted(Verdict) int { return 0 }

// resize sets the group's minCount (and the Job's size with it).
func (w *world) resize(n int32) {
	w.pg.Spec.SchedulingPolicy.Gang.MinCount = n
	if w.owner != nil {
		w.completions = n
	}
}

// TestUnhealthyIgnoresUnknown: only a device reported Unhealthy is a loss.
func TestUnhealthyIgnoresUnknown(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", AllocatedResourcesStatus: []corev1.ResourceStatus{
		{Name: "claim:p-gpu/gpu", Resources: []corev1.ResourceHealth{{ResourceID: "gpu.example.com/n/gpu-0", Health: corev1.ResourceHealthStatusUnknown}}},
		{Name: "claim:p-gpu/gpu", Resources: []corev1.ResourceHealth{{ResourceID: "gpu.example.com/n/gpu-1", Health: corev1.ResourceHealthStatusHealthy}}},
	}}}
	if d := unhealthy(p); d != nil {
		t.Errorf("Unknown and Healthy: want no unhealthy device, got %+v", d)
	}
	p.Status.ContainerStatuses[0].AllocatedResourcesStatus[1].Resources[0].Health = corev1.ResourceHealthStatusUnhealthy
	if d := unhealthy(p); d == nil || d.Device != "gpu.example.com/n/gpu-1" {
		t.Errorf("want gpu-1 unhealthy, got %+v", d)
	}
}

func TestDeviceTaints(t *testing.T) {
	taint := func(added time.Time) resourcev1.DeviceTaint {
		return resourcev1.DeviceTaint{Key: "gpu.example.com/ecc", Value: "fatal", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(added))}
	}
	cases := map[string]struct {
		taint       resourcev1.DeviceTaint
		tolerations []resourcev1.DeviceToleration
		restart     bool
		requeue     bool
	}{
		"NoExecute, not tolerated: the gang restarts": {taint: taint(time.Time{}), restart: true},
		"NoSchedule only: nothing":                    {taint: resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}},
		"None: nothing":                               {taint: resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNone}},
		"tolerated for ever: nothing": {taint: taint(time.Time{}), tolerations: []resourcev1.DeviceToleration{
			{Key: "gpu.example.com/ecc", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute}}},
		"tolerated by an empty key with Exists: nothing": {taint: taint(time.Time{}), tolerations: []resourcev1.DeviceToleration{{Operator: resourcev1.DeviceTolerationOpExists}}},
		"a toleration of another value does not help": {taint: taint(time.Time{}), restart: true, tolerations: []resourcev1.DeviceToleration{
			{Key: "gpu.example.com/ecc", Value: "corrected", Effect: resourcev1.DeviceTaintEffectNoExecute}}},
		"tolerationSeconds not yet over: wait": {taint: taint(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)), requeue: true, tolerations: []resourcev1.DeviceToleration{
			{Key: "gpu.example.com/ecc", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}}},
		"tolerationSeconds over: the gang restarts": {taint: taint(time.Date(2026, 12, 1, 9, 50, 0, 0, time.UTC)), restart: true, tolerations: []resourcev1.DeviceToleration{
			{Key: "gpu.example.com/ecc", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 2, true)
			w.create(0, 2)
			w.bind()
			p := w.rank(0)
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("train-0-gpu")}}
			w.claims["train-0-gpu"] = &resourcev1.ResourceClaim{Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Driver: "gpu.example.com", Pool: "node-0", Device: "gpu-0", Tolerations: tc.tolerations}},
			}}}}
			w.taints[structured.MakeDeviceID("gpu.example.com", "node-0", "gpu-0")] = []resourcev1.DeviceTaint{tc.taint}
			vd := w.decide()
			if got := vd.Restart != nil; got != tc.restart {
				t.Fatalf("restart: want %v, got %v (%+v)", tc.restart, got, vd.Restart)
			}
			if tc.restart && vd.Restart.Reason != ReasonDeviceFailed {
				t.Errorf("reason: want %s, got %s", ReasonDeviceFailed, vd.Restart.Reason)
			}
			if got := vd.RequeueAfter > 0; got != tc.requeue {
				t.Errorf("requeue: want %v, got %v", tc.requeue, vd.RequeueAfter)
			}
		})
	}
}

// TestRunningMessageStable: the Running condition does not change (so is
// not rewritten) while nothing about the members changes — pods being
// created for a resize included.
func TestRunningMessageStable(t *testing.T) {
	w := newWorld(t, 2, true)
	w.create(0, 2)
	w.bind()
	first := w.decide().Running
	w.resize(100)
	w.create(2, 3)
	second := w.decide().Running
	for i := 3; i < 100; i++ {
		w.create(i, i+1)
		if got := w.decide().Running; !reflect.DeepEqual(got, second) {
			t.Fatalf("pod %d changed the Running condition: %+v → %+v", i, second, got)
		}
	}
	if first.Message == second.Message || !strings.Contains(second.Message, "members added later wait") {
		t.Errorf("want the resize noted once: %q then %q", first.Message, second.Message)
	}
}

// TestNotAdmittedNamesOnlyConditionsThatExist: the Running condition of a
// group never admitted points at PodGroupInitiallyScheduled only when the
// group has that condition; else it says what is seen, in words that do not
// change as members are created.
func TestNotAdmittedNamesOnlyConditionsThatExist(t *testing.T) {
	scheduled := metav1.Condition{Type: lockv1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: "Unschedulable"}
	gate := func(w *world) {
		for _, p := range w.pods {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
		}
	}
	cases := map[string]struct {
		setup func(w *world)
		want  string
	}{
		"the scheduler has judged it": {
			setup: func(w *world) { w.create(0, 4); w.pg.Status.Conditions = []metav1.Condition{scheduled} },
			want:  "not admitted yet: see condition PodGroupInitiallyScheduled",
		},
		"no pods yet": {
			setup: func(w *world) {},
			want:  "not admitted yet: it has no member pods yet (label scheduling.lockstep.dev/pod-group=train)",
		},
		"its pods name another scheduler": {
			setup: func(w *world) {
				w.create(0, 2)
				for _, p := range w.pods {
					p.Spec.SchedulerName = corev1.DefaultSchedulerName
				}
			},
			want: "not admitted yet: its pods are not scheduled by Lockstep: set spec.schedulerName: lockstep on them",
		},
		"every member is gated (how Kueue holds pod groups)": {
			setup: func(w *world) { w.create(0, 4); gate(w) },
			want:  "not admitted yet: every pending member has scheduling gates (spec.schedulingGates); the scheduler considers it once they are removed",
		},
		"gated, and the scheduler's condition exists: the condition": {
			setup: func(w *world) { w.create(0, 4); gate(w); w.pg.Status.Conditions = []metav1.Condition{scheduled} },
			want:  "not admitted yet: see condition PodGroupInitiallyScheduled",
		},
		"pending, the scheduler has not judged it yet": {
			setup: func(w *world) { w.create(0, 4); gate(w); w.rank(2).Spec.SchedulingGates = nil },
			want:  "not admitted yet: waiting for the scheduler to consider it",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 4, true)
			tc.setup(w)
			got := w.decide().Running
			if got.Reason != lockv1.RunningReasonPending {
				t.Errorf("reason: want %s, got %s", lockv1.RunningReasonPending, got.Reason)
			}
			if diff := cmp.Diff(tc.want, got.Message); diff != "" {
				t.Errorf("message (-want,+got):\n%s", diff)
			}
			if strings.Contains(got.Message, lockv1.PodGroupInitiallyScheduled) && meta.FindStatusCondition(w.pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled) == nil {
				t.Errorf("Running points at condition %s, which the group does not have: %q", lockv1.PodGroupInitiallyScheduled, got.Message)
			}
		})
	}
}

// TestSuspendedOwnerSaysWhatItWaitsFor: the Running condition of a gang
// whose Job is suspended says so — never "no member pods yet", as if the
// gang lacked pods someone should create — and, when Kueue holds the Job,
// the ClusterQueue whose admission it waits for; a gang Kueue preempts
// (suspends) ends whole, with no restart and no eviction of Lockstep's (the
// Job controller deletes the pods).
func TestSuspendedOwnerSaysWhatItWaitsFor(t *testing.T) {
	const held = "waiting for Kueue admission in ClusterQueue gpus (LocalQueue ns/team)"
	cases := map[string]struct {
		// ran: the gang ran (incarnation 1) before its Job was suspended,
		// its pods then deleted by the Job controller.
		ran  bool
		held string
		want string
	}{
		"never admitted, held by Kueue": {
			held: held,
			want: "not admitted yet: Job ns/train is suspended, " + held,
		},
		"never admitted, suspended by hand": {
			want: "not admitted yet: Job ns/train is suspended",
		},
		"preempted by Kueue while running": {
			ran: true, held: held,
			want: "incarnation 1 ended: Job ns/train is suspended; " + held,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 4, true)
			if tc.ran {
				w.create(0, 4)
				w.bind()
				w.decide()
			}
			w.owner.Stopped, w.owner.Suspended, w.owner.Held = "suspended", true, tc.held
			if tc.ran {
				for i := 0; i < 4; i++ {
					w.deleting(i)
				}
				w.decide()
				w.terminate()
			}
			got := w.decide().Running
			if got.Reason != lockv1.RunningReasonSuspended {
				t.Errorf("reason: want %s, got %s", lockv1.RunningReasonSuspended, got.Reason)
			}
			if diff := cmp.Diff(tc.want, got.Message); diff != "" {
				t.Errorf("message (-want,+got):\n%s", diff)
			}
			if len(w.restarts) != 0 || w.evictions != 0 {
				t.Errorf("restarts %v, evictions %d: want none (the Job controller takes the pods down)", w.restarts, w.evictions)
			}
		})
	}
}

// TestNotAdmittedStableWhileMembersAreCreated: creating a big gang's members
// one by one writes the waiting condition once.
func TestNotAdmittedStableWhileMembersAreCreated(t *testing.T) {
	w := newWorld(t, 100, true)
	w.create(0, 1)
	first := w.decide().Running
	for i := 1; i < 100; i++ {
		w.create(i, i+1)
		if got := w.decide().Running; !reflect.DeepEqual(got, first) {
			t.Fatalf("member %d changed the Running condition: %+v → %+v", i, first, got)
		}
	}
}

// A member a user deletes is lost "was deleted", without the exit code of
// the SIGTERM its own deletion sent; one that exited 1 says so.
func TestDeletedMemberDetail(t *testing.T) {
	for code, want := range map[int32]string{143: "was deleted", 1: "failed (container rank exited 1: Error)"} {
		w := newWorld(t, 4, false)
		w.create(0, 4)
		w.bind()
		w.decide()
		w.exit(0, code, true)
		w.decide()
		if len(w.restarts) != 1 {
			t.Fatalf("exit %d: %d restarts, want 1", code, len(w.restarts))
		}
		if d := w.restarts[0].Detail; !strings.HasSuffix(d, want) {
			t.Errorf("exit %d: detail %q, want it to end %q", code, d, want)
		}
	}
}
