package scheduler

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A gang within its minimum runtime is no victim: gang a asks for 1h
// (its annotation), gang b's PriorityClass gets 30m from --min-runtime.
// The preemptor evicts nothing, says whom it spared until when, and looks
// again when the first minimum ends (no event would wake it): then it
// evicts b, whose 30 minutes are over, and leaves a alone.
func TestMinimumRuntimeSparesVictimsUntilItEnds(t *testing.T) {
	f0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC) // the fixture's clock
	var objs []runtime.Object
	for i, name := range []string{"a", "b"} {
		pods := running(gpuPods("batch", name, name, 2, 10), []string{"gpu-0", "gpu-1"}[i], 0)
		for _, o := range pods {
			if p, ok := o.(*corev1.Pod); ok {
				p.Status.StartTime = &metav1.Time{Time: f0}
				p.Spec.PriorityClassName = "research"
			}
		}
		g := builders.GangPodGroup("batch", name, 2)
		if name == "a" {
			g.Annotations = map[string]string{lockv1.MinRuntimeAnnotation: "1h"}
		}
		objs = append(objs, pods...)
		objs = append(objs, g)
	}
	objs = append(objs, gpuPods("ml", "urgent", "urgent", 2, 100)...)
	objs = append(objs, builders.GangPodGroup("ml", "urgent", 2))
	f := newFixture(t, twoNodes, objs...)
	f.s.opts.MinRuntime = map[string]time.Duration{"research": 30 * time.Minute}
	k := queue.GroupKey("ml", "urgent")

	f.clock.Step(10 * time.Minute)
	f.run(k)
	if evicted := only(f.writes(), "delete pods"); len(evicted) != 0 {
		t.Fatalf("evicted %v within their minimum runtime", evicted)
	}
	want := "within their minimum runtime: PodGroup batch/b until 2026-12-03T00:30:00Z, PodGroup batch/a until 2026-12-03T01:00:00Z"
	if got := condition(f.group("ml", "urgent")); !strings.Contains(got, want) {
		t.Errorf("condition %q, want it to say %q", got, want)
	}
	if got := f.queue.of(k); !strings.HasSuffix(got, "WaitFor") {
		t.Errorf("queue transitions %q, want WaitFor (the end of b's minimum runtime)", got)
	}

	f.clock.Step(21 * time.Minute)
	f.client.ClearActions()
	f.run(k)
	evicted := only(f.writes(), "delete pods")
	if len(evicted) != 2 || !strings.Contains(evicted[0], "batch/b-") || !strings.Contains(evicted[1], "batch/b-") {
		t.Errorf("evicted %v, want gang b (its 30 minutes over), never a (1h)", evicted)
	}
}
