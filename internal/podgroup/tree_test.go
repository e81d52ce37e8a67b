package podgroup_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A tree waits with a reason that says what it waits for: the first leaf
// that waits for its pods, or — when every child could be attempted but
// there are too few — the composite and its count, never an empty reason.
func TestTreeWaitingSaysWhy(t *testing.T) {
	root := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "job"}}
	root.Spec.SchedulingPolicy.Gang = &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 3}
	for name, tc := range map[string]struct {
		pods map[string]int // per group w0, w1 (minCount 2 each)
		want string
	}{
		"too few groups": {pods: map[string]int{"w0": 2, "w1": 2},
			want: "waiting for the tree's groups: CompositePodGroup ml/job has 2 of minGroupCount 3 groups; none is placed until 3 exist"},
		"a group short of pods": {pods: map[string]int{"w0": 1, "w1": 2},
			want: "waiting for the tree's groups: PodGroup ml/w0: waiting for pods: fewer than minCount 2 members exist; none is placed until 2 do"},
	} {
		t.Run(name, func(t *testing.T) {
			var groups []*lockv1.PodGroup
			var pods []*corev1.Pod
			for _, g := range []string{"w0", "w1"} {
				pg := builders.GangPodGroup("ml", g, 2)
				pg.Spec.ParentCompositePodGroupName = ptr.To("job")
				groups = append(groups, pg)
				for i := range tc.pods[g] {
					pods = append(pods, builders.MakePod().Namespace("ml").Name(fmt.Sprintf("%s-%d", g, i)).Member(g).Obj())
				}
			}
			tu := podgroup.ResolveTree(root, []*lockv1.CompositePodGroup{root}, groups, pods, nil)
			if tu.Waiting != tc.want {
				t.Errorf("waiting %q, want %q", tu.Waiting, tc.want)
			}
		})
	}
}
