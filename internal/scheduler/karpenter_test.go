package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// With --karpenter, a gang disrupted whole is bound with Karpenter's
// do-not-disrupt on every member (so consolidation and drift never drain
// one rank of it while it runs); a group that replaces members one by
// one, a lone pod, and every pod without --karpenter are bound without it;
// a member that names the annotation keeps its own value.
func TestBindingProtectsRunningGangsFromKarpenter(t *testing.T) {
	gang := func(n int32) []runtime.Object {
		return []runtime.Object{builders.MakePodGroup().Namespace("ml").Name("train").MinCount(n).Obj()}
	}
	for _, tc := range []struct {
		name      string
		karpenter bool
		objs      []runtime.Object
		key       queue.Key
		// own is a do-not-disrupt value train-0 carries before it is bound.
		own  string
		want map[string]string // pod → annotation after binding ("" absent)
	}{{
		name: "gang", karpenter: true,
		objs: objects(gpuPods("ml", "train", "train", 2, 0), gang(2)), key: queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "true", "train-1": "true"},
	}, {
		name: "gang without --karpenter",
		objs: objects(gpuPods("ml", "train", "train", 2, 0), gang(2)), key: queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "", "train-1": ""},
	}, {
		name: "elastic gang of minCount 1 with two members", karpenter: true,
		objs: objects(gpuPods("ml", "train", "train", 2, 0), gang(1)), key: queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "true", "train-1": "true"},
	}, {
		name: "member names its own value", karpenter: true, own: "30m",
		objs: objects(gpuPods("ml", "train", "train", 2, 0), gang(2)), key: queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "30m", "train-1": "true"},
	}, {
		name: "disruptionMode single", karpenter: true,
		objs: objects(gpuPods("ml", "train", "train", 2, 0),
			[]runtime.Object{builders.MakePodGroup().Namespace("ml").Name("train").MinCount(2).DisruptionSingle().Obj()}),
		key:  queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "", "train-1": ""},
	}, {
		name: "lone pod", karpenter: true,
		objs: gpuPods("ml", "", "solo", 1, 0), key: queue.PodKey("ml", "solo-0"),
		want: map[string]string{"solo-0": ""},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.own != "" {
				for _, o := range tc.objs {
					if p, ok := o.(*corev1.Pod); ok && p.Name == "train-0" {
						p.Annotations = map[string]string{DoNotDisruptAnnotation: tc.own}
					}
				}
			}
			f := newFixtureAPI(t, twoNodes, fixtureAPI{lockstep: []string{"podgroups", "compositepodgroups", "workloads"}, karpenter: tc.karpenter}, tc.objs...)
			f.run(tc.key)
			for name, want := range tc.want {
				p := f.pod("ml", name)
				if p.Spec.NodeName == "" {
					t.Fatalf("%s not bound", name)
				}
				if got := p.Annotations[DoNotDisruptAnnotation]; got != want {
					t.Errorf("%s: %s=%q, want %q", name, DoNotDisruptAnnotation, got, want)
				}
			}
		})
	}
}
