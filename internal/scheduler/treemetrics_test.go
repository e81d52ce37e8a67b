package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// treeMetrics are the tree attempts by result and the time-to-scheduled
// observations (count and sum, in seconds).
type treeMetrics struct {
	Scheduled, Unschedulable, Error float64
	TimeToScheduledCount            uint64
	TimeToScheduledSum              float64
}

func treeMetricsOf(t *testing.T, m *metrics.Scheduler) treeMetrics {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got treeMetrics
	for _, f := range families {
		for _, x := range f.GetMetric() {
			switch f.GetName() {
			case "lockstep_compositepodgroup_schedule_attempts_total":
				v := x.GetCounter().GetValue()
				switch x.GetLabel()[0].GetValue() {
				case metrics.ResultScheduled:
					got.Scheduled = v
				case metrics.ResultUnschedulable:
					got.Unschedulable = v
				case metrics.ResultError:
					got.Error = v
				}
			case "lockstep_compositepodgroup_time_to_scheduled_seconds":
				got.TimeToScheduledCount, got.TimeToScheduledSum = x.GetHistogram().GetSampleCount(), x.GetHistogram().GetSampleSum()
			}
		}
	}
	return got
}

// A tree's attempt counts by its result, and the root's first admission
// observes its time from creation; a flat PodGroup's attempt counts no tree
// attempt.
func TestTreeMetrics(t *testing.T) {
	createdAgo := func(objs []runtime.Object) []runtime.Object {
		root := objs[0].(*lockv1.CompositePodGroup)
		root.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC).Add(-7 * time.Second))
		return objs
	}
	flat := append([]runtime.Object{builders.GangPodGroup("ml", "flat", 2)}, gpuPods("ml", "flat", "flat", 2, 0)...)
	for name, tc := range map[string]struct {
		objs []runtime.Object
		key  queue.Key
		want treeMetrics
	}{
		"a tree that fits":          {objs: createdAgo(tree(2, 2, 2)), key: queue.TreeKey("ml", "job"), want: treeMetrics{Scheduled: 1, TimeToScheduledCount: 1, TimeToScheduledSum: 7}},
		"a tree that does not fit":  {objs: createdAgo(tree(2, 2, 3)), key: queue.TreeKey("ml", "job"), want: treeMetrics{Unschedulable: 1}},
		"a flat PodGroup that fits": {objs: flat, key: queue.GroupKey("ml", "flat")},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, twoNodes, tc.objs...)
			f.run(tc.key)
			if diff := cmp.Diff(tc.want, treeMetricsOf(t, f.s.metrics)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
