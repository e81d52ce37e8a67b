package scheduler

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// noticeFixture: gang batch/a (priority 10, 2 pods on gpu-0) asks for 10
// minutes of notice; gang batch/b (priority 500) fills gpu-1; ml/urgent
// (priority 100, 2 GPUs) can only have a's.
func noticeFixture(t *testing.T) (*fixture, queue.Key) {
	t.Helper()
	f0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC) // the fixture's clock
	objs := runningGang("batch", "a", "gpu-0", 2, 10, f0, map[string]string{lockv1.PreemptionNoticeAnnotation: "10m"}, false)
	objs = append(objs, runningGang("batch", "b", "gpu-1", 2, 500, f0, nil, false)...)
	objs = append(objs, gpuPods("ml", "urgent", "urgent", 2, 100)...)
	objs = append(objs, builders.GangPodGroup("ml", "urgent", 2))
	f := newFixture(t, twoNodes, objs...)
	k := queue.GroupKey("ml", "urgent")
	f.clock.Step(time.Hour)
	f.run(k)
	return f, k
}

// pendingCondition is a group's PreemptionPending as "Status/Reason: message".
func pendingCondition(pg *lockv1.PodGroup) string {
	c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PreemptionPending)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}

// A victim that asked for notice is told, not evicted: its group and its
// pods are marked PreemptionPending (the pods' annotation carries the
// deadline, for a downward-API volume), the preemptor's nomination holds
// the capacity, and the victim goes whole when it acknowledges — a
// checkpoint later than the notice — or when the notice ends.
func TestPreemptionNoticeThenEviction(t *testing.T) {
	deadline := "2026-12-03T01:10:00Z" // the fixture's clock + 1h + 10m
	for _, tc := range []struct {
		name string
		// then is what happens after the notice: the victim writes
		// annotations, time passes.
		then      func(f *fixture)
		wantEvict bool
	}{
		{name: "acknowledged by a member", then: func(f *fixture) {
			f.annotate(&corev1.Pod{}, "batch", "a-1", lockv1.CheckpointedAtAnnotation, "2026-12-03T01:02:00Z")
			f.clock.Step(2 * time.Minute)
		}, wantEvict: true},
		{name: "acknowledged on the PodGroup", then: func(f *fixture) {
			f.annotate(&lockv1.PodGroup{}, "batch", "a", lockv1.CheckpointedAtAnnotation, "2026-12-03T01:03:00Z")
			f.clock.Step(3 * time.Minute)
		}, wantEvict: true},
		{name: "a checkpoint older than the notice is no acknowledgement", then: func(f *fixture) {
			f.annotate(&corev1.Pod{}, "batch", "a-0", lockv1.CheckpointedAtAnnotation, "2026-12-03T00:59:00Z")
			f.clock.Step(time.Minute)
		}},
		{name: "the notice ends", then: func(f *fixture) { f.clock.Step(10 * time.Minute) }, wantEvict: true},
		{name: "the notice runs", then: func(f *fixture) { f.clock.Step(9 * time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, k := noticeFixture(t)
			if evicted := only(f.writes(), "delete pods"); len(evicted) != 0 {
				t.Fatalf("evicted %v at once; want notice first", evicted)
			}
			for _, name := range []string{"a-0", "a-1"} {
				p := f.pod("batch", name)
				if got := p.Annotations[lockv1.PreemptionPendingAnnotation]; got != deadline {
					t.Errorf("pod %s annotation %s = %q, want the deadline %s", name, lockv1.PreemptionPendingAnnotation, got, deadline)
				}
				if !podConditionTrue(p, lockv1.PreemptionPending) {
					t.Errorf("pod %s has no PreemptionPending=True condition: %v", name, p.Status.Conditions)
				}
			}
			got := pendingCondition(f.group("batch", "a"))
			for _, want := range []string{"True/NoticeGiven", "PodGroup ml/urgent (priority 100)", deadline, lockv1.CheckpointedAtAnnotation} {
				if !strings.Contains(got, want) {
					t.Errorf("victim's PreemptionPending %q, want it to say %q", got, want)
				}
			}
			if f.s.state.Cache.Nomination(k.String()) == nil {
				t.Error("the preemptor holds no nomination while its victim is under notice")
			}
			if got := f.queue.of(k); !strings.HasSuffix(got, "WaitFor") {
				t.Errorf("queue transitions %q, want WaitFor", got)
			}

			tc.then(f)
			f.client.ClearActions()
			f.run(k)
			evicted := only(f.writes(), "delete pods")
			if !tc.wantEvict {
				if len(evicted) != 0 {
					t.Fatalf("evicted %v while the notice runs", evicted)
				}
				if got := condition(f.group("ml", "urgent")); !strings.Contains(got, "under preemption notice until "+deadline) {
					t.Errorf("preemptor's condition %q, want it to say the notice runs until %s", got, deadline)
				}
				return
			}
			if len(evicted) != 2 || !strings.Contains(evicted[0], "batch/a-") || !strings.Contains(evicted[1], "batch/a-") {
				t.Fatalf("evicted %v, want gang a whole", evicted)
			}
			if got := pendingCondition(f.group("batch", "a")); !strings.HasPrefix(got, "False/Evicted") {
				t.Errorf("victim's PreemptionPending %q after eviction, want False/Evicted", got)
			}
		})
	}
}

// A preemptor that no longer needs its victim — it went — withdraws the
// notice: the victim's annotation goes and its condition says so.
func TestPreemptionNoticeIsWithdrawn(t *testing.T) {
	f, k := noticeFixture(t)
	// Both pods must be gone from the cache: with one left the preemptor
	// still exists and waits for its members, holding the notice.
	f.deleteGang("ml", "urgent", 2)
	f.run(k)
	for _, name := range []string{"a-0", "a-1"} {
		if v, ok := f.pod("batch", name).Annotations[lockv1.PreemptionPendingAnnotation]; ok {
			t.Errorf("pod %s keeps %s=%q after the preemptor went", name, lockv1.PreemptionPendingAnnotation, v)
		}
	}
	if got := pendingCondition(f.group("batch", "a")); !strings.HasPrefix(got, "False/Withdrawn") {
		t.Errorf("victim's PreemptionPending %q, want False/Withdrawn", got)
	}
	if evicted := only(f.writes(), "delete pods batch"); len(evicted) != 0 {
		t.Errorf("evicted %v", evicted)
	}
}

func podConditionTrue(p *corev1.Pod, typ string) bool {
	for _, c := range p.Status.Conditions {
		if string(c.Type) == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// annotate sets an annotation on a pod or PodGroup (obj says which) as a
// user would, and waits until the scheduler's informers see it.
func (f *fixture) annotate(obj runtime.Object, ns, name, key, value string) {
	f.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	switch obj.(type) {
	case *corev1.Pod:
		if _, err := f.client.CoreV1().Pods(ns).Patch(f.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			f.t.Fatal(err)
		}
		f.waitFor("the annotation", func() bool {
			p, err := f.s.listers.pods.Pods(ns).Get(name)
			return err == nil && p.Annotations[key] == value
		})
	default:
		if _, err := f.dyn.Resource(podgroup.Resource).Namespace(ns).Patch(f.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			f.t.Fatal(err)
		}
		f.waitFor("the annotation", func() bool {
			pg, err := f.s.podGroup(ns, name)
			return err == nil && pg != nil && pg.Annotations[key] == value
		})
	}
}
