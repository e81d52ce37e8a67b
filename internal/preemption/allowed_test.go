package preemption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// TestAllowed: a group's preemptionPolicy can only forbid what its members
// may do — members' Never wins over a group's PreemptLowerPriority — and a
// group that says nothing leaves the members' policy as it is.
func TestAllowed(t *testing.T) {
	group := func(policy *lockv1.PreemptionPolicy) *lockv1.PodGroup {
		pg := builders.GangPodGroup("ns", "g", 2)
		pg.Spec.PreemptionPolicy = policy
		return pg
	}
	pod := func(policy *corev1.PreemptionPolicy) *corev1.Pod {
		p := builders.MakePod().Namespace("ns").Name("p").Member("g").Obj()
		p.Spec.PreemptionPolicy = policy
		return p
	}
	lower, never := ptr.To(lockv1.PreemptLowerPriority), ptr.To(lockv1.PreemptNever)
	podLower, podNever := ptr.To(corev1.PreemptLowerPriority), ptr.To(corev1.PreemptNever)
	for name, tc := range map[string]struct {
		pg   *lockv1.PodGroup
		pods []*corev1.Pod
		want bool
	}{
		"a lone pod of a preempting class":                          {pods: []*corev1.Pod{pod(podLower)}, want: true},
		"a lone pod of a Never class":                               {pods: []*corev1.Pod{pod(podNever)}},
		"a lone pod with no policy (the API server's default)":      {pods: []*corev1.Pod{pod(nil)}, want: true},
		"a group without a policy, preempting members":              {pg: group(nil), pods: []*corev1.Pod{pod(podLower), pod(nil)}, want: true},
		"a group without a policy, one Never member":                {pg: group(nil), pods: []*corev1.Pod{pod(podLower), pod(podNever)}},
		"a PreemptLowerPriority group of preempting members":        {pg: group(lower), pods: []*corev1.Pod{pod(podLower), pod(podLower)}, want: true},
		"a PreemptLowerPriority group of Never members":             {pg: group(lower), pods: []*corev1.Pod{pod(podNever), pod(podNever)}},
		"a PreemptLowerPriority group with one Never member":        {pg: group(lower), pods: []*corev1.Pod{pod(podLower), pod(podNever)}},
		"a Never group of preempting members":                       {pg: group(never), pods: []*corev1.Pod{pod(podLower), pod(podLower)}},
		"a Never group of Never members":                            {pg: group(never), pods: []*corev1.Pod{pod(podNever)}},
		"a PreemptLowerPriority group with no pending member (yet)": {pg: group(lower), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Allowed(tc.pg, tc.pods); got != tc.want {
				t.Errorf("Allowed = %v, want %v", got, tc.want)
			}
		})
	}
}
