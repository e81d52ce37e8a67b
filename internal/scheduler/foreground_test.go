package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// The writes nobody waits on give way while the scheduler has work someone
// does: a unit ready to be decided, a gang whose members are arriving (for
// arrivalLinger after it was decided to wait for them), a binding in
// flight. A gang that does not fit is nobody's wait; nor is a gang whose
// members stopped arriving.
func TestForegroundIsWorkSomeoneWaitsOn(t *testing.T) {
	// arriving: 1 of its 2 members exists. huge: 5 of 5, more GPUs than
	// twoNodes has (2 × 2).
	objs := append([]runtime.Object{builders.GangPodGroup("ml", "arriving", 2), builders.GangPodGroup("ml", "huge", 5)}, gpuPods("ml", "arriving", "a", 1, 0)...)
	objs = append(objs, gpuPods("ml", "huge", "h", 5, 0)...)
	f := newFixture(t, twoNodes, objs...)
	f.waitFor("the units queued", func() bool { a, _ := f.queue.Len(); return a == 2 })
	if !f.s.foreground() {
		t.Errorf("units ready to be decided: not foreground")
	}
	pop := func() queue.Key {
		t.Helper()
		it, ok := f.queue.Pop(f.ctx)
		if !ok {
			t.Fatal("no unit")
		}
		f.s.scheduleOne(f.ctx, it)
		f.s.podStatus.idle()
		return it.Key
	}
	for range 2 {
		if k := pop(); k == queue.GroupKey("ml", "arriving") {
			if !f.s.foreground() {
				t.Errorf("just after %s was decided to wait for its members: not foreground", k)
			}
		}
	}
	if got := f.queue.of(queue.GroupKey("ml", "arriving")); got != "Wait" {
		t.Fatalf("arriving: queue transitions %q, want Wait", got)
	}
	if got := f.queue.of(queue.GroupKey("ml", "huge")); got != "Unschedulable" {
		t.Fatalf("huge: queue transitions %q, want Unschedulable", got)
	}
	if a, _ := f.queue.Len(); a != 0 {
		t.Fatalf("%d units still ready", a)
	}
	f.clock.Step(arrivalLinger / 2)
	if !f.s.foreground() {
		t.Errorf("%s after a gang was decided to wait for its members: not foreground", arrivalLinger/2)
	}
	f.clock.Step(arrivalLinger)
	if f.s.foreground() {
		t.Errorf("%s after, with only gangs that do not fit or no longer arrive: foreground", arrivalLinger*3/2)
	}
	f.s.bindSlots <- struct{}{}
	if !f.s.foreground() {
		t.Errorf("a binding in flight: not foreground")
	}
	<-f.s.bindSlots
}

// Events give way to the foreground and also to a backlog of pods'
// conditions not yet written (more than giveWayBacklog): conditions are
// what autoscalers and tools read. A few conditions are no backlog.
func TestEventsGiveWayToPendingConditions(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1e9, 0))
	var pods []*corev1.Pod
	for i := 0; i <= giveWayBacklog; i++ {
		p := builders.MakePod().Namespace("ml").Name(fmt.Sprint("p-", i)).Obj()
		p.UID = types.UID(p.Name)
		pods = append(pods, p)
	}
	s := &Scheduler{clock: clk, bindSlots: make(chan struct{}, 1), podStatus: newPodStatusWriter(fake.NewClientset(), clk)}
	s.queue = queue.New(clk, func(queue.Key) (int32, time.Time) { return 0, time.Time{} })
	if s.foreground() || s.eventsGiveWay() {
		t.Fatalf("nothing to do: foreground %v, events give way %v; want neither", s.foreground(), s.eventsGiveWay())
	}
	for _, p := range pods[:giveWayBacklog] {
		s.podStatus.set(p, corev1.PodReasonUnschedulable, "does not fit", "")
	}
	if s.eventsGiveWay() {
		t.Errorf("%d conditions not yet written: events give way; want them not to (no backlog)", giveWayBacklog)
	}
	s.podStatus.set(pods[giveWayBacklog], corev1.PodReasonUnschedulable, "does not fit", "")
	if s.foreground() || !s.eventsGiveWay() {
		t.Errorf("%d conditions not yet written: foreground %v, events give way %v; want only the events to give way", giveWayBacklog+1, s.foreground(), s.eventsGiveWay())
	}
	for _, p := range pods {
		s.podStatus.forget(p.UID)
	}
	s.queue.Add(queue.PodKey("ml", "q"))
	if !s.foreground() || !s.eventsGiveWay() {
		t.Errorf("a unit to decide: foreground %v, events give way %v; want both", s.foreground(), s.eventsGiveWay())
	}
}

// A few writes nobody waits on never give way, however busy the
// scheduler: a small gang's conditions and a preemption's events go out at
// once, as kube-scheduler's client burst lets them.
func TestAFewWritesNeverGiveWay(t *testing.T) {
	pods, client, w, pace := pacedWriter(giveWayBacklog, true)
	for _, o := range pods {
		w.set(o.(*corev1.Pod), corev1.PodReasonUnschedulable, "does not fit", "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if writes := writeAll(ctx, w, client); writes != giveWayBacklog {
		t.Fatalf("%d writes, want %d", writes, giveWayBacklog)
	}
	pace.mu.Lock()
	defer pace.mu.Unlock()
	if pace.yields != 0 {
		t.Errorf("%d of %d conditions gave way; want none (no backlog)", pace.yields, giveWayBacklog)
	}

	events := newEventPace(func() bool { return true })
	for i := 0; i < 3; i++ {
		if err := events.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := float64(events.limiter.Limit()); got != pacedQPS {
		t.Errorf("3 events waiting: paced at %.0f/s, want %d (no backlog)", got, pacedQPS)
	}
}

// A waiting cycle's unit comes back at a pace its cost sets: a cheap
// cycle (every small gang's) at once, a dear one (a gang of thousands
// reading its members as each arrives) after three times its cost, at
// most a second.
func TestWaitGap(t *testing.T) {
	for _, tc := range []struct {
		cycle, want time.Duration
	}{
		{0, 0},
		{200 * time.Microsecond, 0},
		{cheapCycle - 1, 0},
		{cheapCycle, 3 * cheapCycle},
		{40 * time.Millisecond, 120 * time.Millisecond},
		{400 * time.Millisecond, time.Second},
	} {
		if got := waitGap(tc.cycle); got != tc.want {
			t.Errorf("waitGap(%v) = %v, want %v", tc.cycle, got, tc.want)
		}
	}
}
