package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A gang that asks more than the nodes hold even empty says so, and is
// not decided again when a pod ends (that cannot help it) — only when a
// node changes. A gang that waits for running pods to end is woken by
// them as before.
func TestGangBeyondCapacityWaitsForNodes(t *testing.T) {
	cpuGang := func(name string, n int, cpu string) []runtime.Object {
		var out []runtime.Object
		for i := 0; i < n; i++ {
			p := builders.MakePod().Namespace("ml").Name(fmt.Sprintf("%s-%d", name, i)).Scheduler(lockv1.SchedulerName).Member(name).Req(corev1.ResourceCPU, cpu).Obj()
			p.UID = types.UID("ml-" + p.Name)
			out = append(out, p)
		}
		return append(out, builders.GangPodGroup("ml", name, int32(n)))
	}
	other := builders.MakePod().Namespace("other").Name("busy").Req(corev1.ResourceCPU, "12").Obj()
	other.UID, other.Spec.NodeName, other.Status.Phase = "busy", "gpu-0", corev1.PodRunning
	// twoNodes: 2 nodes × 16 CPUs. huge asks 40; waiting asks 2 × 10,
	// which fits only once busy (12 of gpu-0's 16) ends.
	f := newFixture(t, twoNodes, objects(cpuGang("huge", 40, "1"), cpuGang("waiting", 2, "10"), []runtime.Object{other})...)
	huge, waiting := queue.GroupKey("ml", "huge"), queue.GroupKey("ml", "waiting")
	// Both are queued by their pods' events; each runs the cycle it pops.
	f.waitFor("both units queued", func() bool { a, _ := f.queue.Len(); return a == 2 })
	for range 2 {
		it, ok := f.queue.Pop(f.ctx)
		if !ok {
			t.Fatal("no unit")
		}
		f.s.scheduleOne(f.ctx, it)
		f.s.podStatus.idle()
	}
	if got := f.queue.of(huge); got != "BeyondCapacity" {
		t.Errorf("huge: queue transitions %q, want BeyondCapacity", got)
	}
	if got := f.queue.of(waiting); got != "Unschedulable" {
		t.Errorf("waiting: queue transitions %q, want Unschedulable", got)
	}
	want := "beyond what the nodes hold even empty: 40 pods needed at once ask at least 40 cpu, the 2 nodes have 32 in all; it is tried again when nodes change"
	if got := condition(f.group("ml", "huge")); !strings.HasPrefix(got, "False/Unschedulable: ") || !strings.Contains(got, want) {
		t.Errorf("huge's condition %q, want Unschedulable with %q", got, want)
	}
	if got := condition(f.group("ml", "waiting")); strings.Contains(got, "beyond") {
		t.Errorf("waiting's condition %q says it is beyond capacity", got)
	}

	// busy ends: waiting is woken, huge is not.
	f.clock.Step(time.Minute) // past both backoffs
	if err := f.client.CoreV1().Pods("other").Delete(f.ctx, "busy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("waiting woken by busy's end", func() bool { a, _ := f.queue.Len(); return a == 1 })
	if it, ok := f.queue.Pop(f.ctx); !ok || it.Key != waiting {
		t.Fatalf("popped %v, want %v", it.Key, waiting)
	}
	if a, p := f.queue.Len(); a != 0 || p != 1 {
		t.Errorf("after a pod ended: %d active, %d parked; want huge still parked", a, p)
	}

	// An event for a pod huge had already seen (delivered while it was
	// decided) does not have it decided again: nothing its verdict reads
	// changed.
	decided := decisions(t, f)
	f.queue.Add(huge)
	runNext(t, f, huge)
	if n := decisions(t, f); n != decided {
		t.Errorf("huge was decided again (%d decisions, %d before) with nothing changed", n, decided)
	}
	if got := f.queue.of(huge); got != "BeyondCapacity,BeyondCapacity" {
		t.Errorf("huge: queue transitions %q, want it parked beyond capacity again", got)
	}

	// The recheck comes 5 minutes after its decision (1 minute ago), not
	// after the skip: it is then decided again.
	f.clock.Step(queue.CapacityRecheck - time.Minute - time.Second)
	if a, _ := f.queue.Len(); a != 0 {
		t.Fatalf("%d active a second before the recheck", a)
	}
	f.clock.Step(time.Second)
	f.waitFor("huge woken by the recheck", func() bool { a, _ := f.queue.Len(); return a == 1 })
	runNext(t, f, huge)
	if n := decisions(t, f); n != decided+1 {
		t.Errorf("%d decisions after the recheck, want %d", n, decided+1)
	}
	decided++
	f.clock.Step(time.Minute)

	// A node changes (a label): huge is tried again.
	n, err := f.client.CoreV1().Nodes().Get(f.ctx, "gpu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["example.com/rack"] = "r1"
	if _, err := f.client.CoreV1().Nodes().Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("huge woken by the node's change", func() bool { a, _ := f.queue.Len(); return a == 1 })
	runNext(t, f, huge)
	if n := decisions(t, f); n != decided+1 {
		t.Errorf("%d decisions after the node changed, want %d", n, decided+1)
	}
}

// runNext pops the next unit, which must be want, and runs its cycle.
func runNext(t *testing.T, f *fixture, want queue.Key) {
	t.Helper()
	it, ok := f.queue.Pop(f.ctx)
	if !ok || it.Key != want {
		t.Fatalf("popped %v, want %v", it.Key, want)
	}
	f.s.scheduleOne(f.ctx, it)
}

// decisions counts the scheduler's decisions so far.
func decisions(t *testing.T, f *fixture) uint64 {
	t.Helper()
	m := &dto.Metric{}
	if err := f.s.metrics.AlgorithmDuration.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
