package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/lockstep-dev/lockstep/test/builders"
)

// The writer coalesces: of several wishes for a pod before a worker takes
// it, only the last is written; a wish the pod already shows, or that was
// already asked for, is no news and writes nothing; a forgotten pod may be
// asked again.
func TestPodStatusWriterCoalesces(t *testing.T) {
	p := builders.MakePod().Namespace("ml").Name("p").Obj()
	p.UID = "p"
	client := fake.NewClientset(p)
	w := newPodStatusWriter(client, testingclock.NewFakePassiveClock(time.Unix(1e9, 0)))
	if !w.set(p, corev1.PodReasonUnschedulable, "first", "") || !w.set(p, corev1.PodReasonUnschedulable, "second", "n1") {
		t.Fatal("a new wish was not news")
	}
	if w.set(p, corev1.PodReasonUnschedulable, "second", "n1") {
		t.Error("the same wish twice was news")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writes := writeAll(ctx, w, client)
	if writes != 1 {
		t.Errorf("%d writes, want 1 (the last wish)", writes)
	}
	got, err := client.CoreV1().Pods("ml").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NominatedNodeName != "n1" || podScheduled(got) != "False/Unschedulable: second" {
		t.Errorf("pod shows %q nominated to %q; want the last wish", podScheduled(got), got.Status.NominatedNodeName)
	}
	if w.set(got, corev1.PodReasonUnschedulable, "second", "n1") {
		t.Error("a wish the pod shows was news")
	}
	w.forget(p.UID)
	if !w.set(p, corev1.PodReasonUnschedulable, "second", "n1") {
		t.Error("after forget, the pod (as the cache had it) could not be asked again")
	}
}

// countingPace counts the writes it lets through and the answers it is
// told of (the writer's pacer; it never waits).
type countingPace struct {
	mu                              sync.Mutex
	waits, answers, yields, resumes int
}

func (p *countingPace) Wait(context.Context) error { p.mu.Lock(); p.waits++; p.mu.Unlock(); return nil }
func (p *countingPace) observe(time.Duration, error) {
	p.mu.Lock()
	p.answers++
	p.mu.Unlock()
}
func (p *countingPace) rate() float64 { return 0 }
func (p *countingPace) yield() {
	p.mu.Lock()
	p.yields++
	p.mu.Unlock()
}
func (p *countingPace) resume() {
	p.mu.Lock()
	p.resumes++
	p.mu.Unlock()
}

// Every write goes through the writer's pace, so a gang of thousands that
// does not fit cannot take the API server from everyone else at once; and
// while the scheduler has work someone waits on, each write first gives
// way (yield), and when it has none, takes the pace up again (resume).
func TestPodStatusWriterIsPaced(t *testing.T) {
	for _, othersWaiting := range []bool{false, true} {
		t.Run(fmt.Sprintf("othersWaiting=%v", othersWaiting), func(t *testing.T) {
			pods, client, w, pace := pacedWriter(20, othersWaiting)
			w.backlog = 0 // every wish counts as a backlog here (giveWayBacklog: below)
			for _, o := range pods {
				w.set(o.(*corev1.Pod), corev1.PodReasonUnschedulable, "does not fit", "")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			writes := writeAll(ctx, w, client)
			pace.mu.Lock()
			defer pace.mu.Unlock()
			if writes != 20 || pace.waits < writes || pace.answers != writes {
				t.Errorf("%d writes, %d paced, %d answers told to the pace; want 20 writes, each paced and its answer told", writes, pace.waits, pace.answers)
			}
			// Each worker's last turn finds nothing waiting, and takes
			// the pace up again whatever the scheduler has.
			if othersWaiting && (pace.yields < writes || pace.resumes > podStatusWorkers) || !othersWaiting && (pace.resumes < writes || pace.yields != 0) {
				t.Errorf("%d writes: %d gave way and %d took the pace up again; want all to give way when the scheduler has waiting work and all to take it up when not", writes, pace.yields, pace.resumes)
			}
		})
	}
}

// pacedWriter is a pod status writer of n pods, paced by a countingPace,
// told whether the scheduler has waiting work.
func pacedWriter(n int, othersWaiting bool) ([]runtime.Object, *fake.Clientset, *podStatusWriter, *countingPace) {
	var pods []runtime.Object
	for i := 0; i < n; i++ {
		p := builders.MakePod().Namespace("ml").Name(fmt.Sprint("p-", i)).Obj()
		p.UID = types.UID(p.Name)
		pods = append(pods, p)
	}
	client := fake.NewClientset(pods...)
	w := newPodStatusWriter(client, testingclock.NewFakePassiveClock(time.Unix(1e9, 0)))
	pace := &countingPace{}
	w.pace = pace
	w.othersWaiting = func() bool { return othersWaiting }
	return pods, client, w, pace
}

// countingLimiter counts the events it lets through (the sink's rate
// limiter).
type countingLimiter struct{ waits int }

func (p *countingLimiter) Wait(context.Context) error { p.waits++; return nil }
func (p *countingLimiter) TryAccept() bool            { return true }
func (p *countingLimiter) Accept()                    {}
func (p *countingLimiter) Stop()                      {}
func (p *countingLimiter) QPS() float32               { return 0 }

// recordingSink counts the events written to it.
type recordingSink struct {
	mu      sync.Mutex
	created int
}

func (r *recordingSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	r.mu.Lock()
	r.created++
	r.mu.Unlock()
	return e, nil
}
func (r *recordingSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return e, nil
}
func (r *recordingSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return e, nil
}

// Every event goes through the pace too: client-go writes each event in a
// goroutine of its own, which for a gang of thousands put thousands of
// writes on the scheduler's connection at once.
func TestEventsArePaced(t *testing.T) {
	inner := &recordingSink{}
	s := newPacedSink(inner, nil)
	pace := &countingLimiter{}
	s.pace = pace
	for i := 0; i < 5; i++ {
		if _, err := s.Create(context.Background(), &eventsv1.Event{}); err != nil {
			t.Fatal(err)
		}
	}
	if inner.created != 5 || pace.waits != 5 {
		t.Errorf("%d events written, %d paced; want 5 and 5", inner.created, pace.waits)
	}
}

// The events give way as the pod conditions do: at the trickle, without
// a burst, while the scheduler has work someone waits on; at
// kube-scheduler's client pace again when it has none.
func TestEventsGiveWay(t *testing.T) {
	foreground := false
	p := newEventPace(func() bool { return foreground })
	p.backlog = 0 // every event counts as a backlog here (giveWayBacklog: below)
	for _, tc := range []struct {
		foreground bool
		limit      float64
		burst      int
	}{{false, pacedQPS, pacedBurst}, {true, paceYielded, 1}, {true, paceYielded, 1}, {false, pacedQPS, pacedBurst}} {
		foreground = tc.foreground
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, burst := float64(p.limiter.Limit()), p.limiter.Burst(); got != tc.limit || burst != tc.burst {
			t.Errorf("foreground=%v: paced at %.0f/s with a burst of %d, want %.0f/s and %d", tc.foreground, got, burst, tc.limit, tc.burst)
		}
	}
}

// A write that fails is tried again: the unit that asked is parked, so a
// dropped wish would leave the pod showing a stale reason. A write that
// keeps failing is given up after podStatusRetries tries; a pod that is
// gone is not tried again.
func TestPodStatusWriterRetriesFailedWrites(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failures   int // patches that fail before the API server takes them
		err        error
		wantWrites int
		wantShown  bool
		gaveUp     bool // the next cycle may ask again
	}{
		{name: "written after two timeouts", failures: 2, err: apierrors.NewServerTimeout(corev1.Resource("pods"), "patch", 1), wantWrites: 3, wantShown: true},
		{name: "given up after every try failed", failures: 100, err: apierrors.NewTooManyRequests("busy", 1), wantWrites: 1 + podStatusRetries, gaveUp: true},
		{name: "a pod that is gone is not tried again", failures: 100, err: apierrors.NewNotFound(corev1.Resource("pods"), "p"), wantWrites: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := builders.MakePod().Namespace("ml").Name("p").Obj()
			p.UID = "p"
			client := fake.NewClientset(p)
			patches := 0
			client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				if patches <= tc.failures {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			w := newPodStatusWriter(client, testingclock.NewFakePassiveClock(time.Unix(1e9, 0)))
			w.pace = &countingPace{}
			w.set(p, corev1.PodReasonUnschedulable, "does not fit", "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go w.run(ctx)
			w.idle()
			got, err := client.CoreV1().Pods("ml").Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if shown := podScheduled(got) == "False/Unschedulable: does not fit"; patches != tc.wantWrites || shown != tc.wantShown {
				t.Errorf("%d writes, condition shown %v; want %d, %v", patches, shown, tc.wantWrites, tc.wantShown)
			}
			if tc.gaveUp && !w.set(p, corev1.PodReasonUnschedulable, "does not fit", "") {
				t.Error("after the writer gave up, the next cycle could not ask again")
			}
		})
	}
}

// writeAll runs w until every wish is written and returns the pod status
// patches client received.
func writeAll(ctx context.Context, w *podStatusWriter, client *fake.Clientset) int {
	go w.run(ctx)
	w.idle()
	writes := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			writes++
		}
	}
	return writes
}
