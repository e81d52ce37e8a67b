package scheduler

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// delayFixture: gang batch/low (priority 10) holds gpu-0, started at the
// fixture's clock; gpu-1 is held by batch/ending (priority 500, declared
// to end maxRuntime after its start, "" for none); ml/urgent (priority
// 100, 2 GPUs, its pods created an hour in) may preempt low. The clock
// is then an hour in.
func delayFixture(t *testing.T, urgentAnnotations map[string]string, maxRuntime string) (*fixture, queue.Key) {
	t.Helper()
	f0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC) // the fixture's clock
	var ending map[string]string
	if maxRuntime != "" {
		ending = map[string]string{lockv1.MaxRuntimeAnnotation: maxRuntime}
	}
	objs := runningGang("batch", "low", "gpu-0", 2, 10, f0, nil, false)
	objs = append(objs, runningGang("batch", "ending", "gpu-1", 2, 500, f0, ending, false)...)
	urgent := gpuPods("ml", "urgent", "urgent", 2, 100)
	for _, o := range urgent {
		if p, ok := o.(*corev1.Pod); ok {
			p.CreationTimestamp = metav1.NewTime(f0.Add(time.Hour))
		}
	}
	pg := builders.GangPodGroup("ml", "urgent", 2)
	pg.Annotations = urgentAnnotations
	objs = append(append(objs, urgent...), pg)
	f := newFixture(t, twoNodes, objs...)
	f.s.opts.PreemptionShortWait = 5 * time.Minute
	f.clock.Step(time.Hour)
	return f, queue.GroupKey("ml", "urgent")
}

// A preemption delay: the preemptor evicts nothing until it has waited
// that long since its newest member was created, says until when, and
// looks again then (no event would wake it).
func TestPreemptionDelay(t *testing.T) {
	f, k := delayFixture(t, map[string]string{lockv1.PreemptionDelayAnnotation: "10m"}, "")
	f.run(k)
	if evicted := only(f.writes(), "delete pods"); len(evicted) != 0 {
		t.Fatalf("evicted %v within the preemption delay", evicted)
	}
	if got, want := condition(f.group("ml", "urgent")), "preemption delayed until 2026-12-03T01:10:00Z"; !strings.Contains(got, want) {
		t.Errorf("condition %q, want it to say %q", got, want)
	}
	if got := f.queue.of(k); !strings.HasSuffix(got, "WaitFor") {
		t.Errorf("queue transitions %q, want WaitFor (the delay's end)", got)
	}
	f.clock.Step(10 * time.Minute)
	f.client.ClearActions()
	f.run(k)
	if evicted := only(f.writes(), "delete pods"); len(evicted) != 2 || !strings.Contains(evicted[0], "batch/low-") {
		t.Errorf("evicted %v after the delay, want gang low", evicted)
	}
}

// A preemptor for which a gang that declared its end frees room within
// --preemption-short-wait, at less cost than the eviction, waits for it:
// it evicts nothing, its condition says for whom until when and what it
// spared, and it holds a nomination on what the ending gang frees. Without
// a declared end it preempts at once.
func TestShortWaitInsteadOfPreemption(t *testing.T) {
	for _, tc := range []struct {
		maxRuntime string
		wantWait   bool
	}{{"1h2m", true}, {"", false}} {
		t.Run("max-runtime="+tc.maxRuntime, func(t *testing.T) {
			f, k := delayFixture(t, nil, tc.maxRuntime)
			f.run(k)
			evicted := only(f.writes(), "delete pods")
			if !tc.wantWait {
				if len(evicted) != 2 {
					t.Errorf("evicted %v, want gang low at once", evicted)
				}
				return
			}
			if len(evicted) != 0 {
				t.Fatalf("evicted %v, want a short wait instead", evicted)
			}
			want := "waiting until 2026-12-03T01:02:00Z for PodGroup batch/ending to end as declared, instead of preempting PodGroup batch/low (2 pods, priority 10), losing 2.0 device-hours"
			if got := condition(f.group("ml", "urgent")); !strings.Contains(got, want) {
				t.Errorf("condition %q, want it to say %q", got, want)
			}
			if f.s.state.Cache.Nomination(k.String()) == nil {
				t.Error("no nomination holds what the ending gang frees")
			}
		})
	}
}
