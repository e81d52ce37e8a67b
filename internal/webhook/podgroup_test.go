package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/test/builders"
)

func groupValidator(objs ...client.Object) *PodGroupValidator {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(objs...).
		Build()
	return &PodGroupValidator{reads: testReads(c)}
}

// causes are the field paths of an admission refusal, each with a part of
// its message that names the failed condition or the fix.
func causes(err error) []string {
	var out []string
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			out = append(out, c.Field)
		}
	}
	return out
}

// TestPodGroupValidatorCreate: names that cannot be a label value, topology
// keys that cannot be a node label and a hand-written minCount beyond
// MaxMinCount are refused with their field path, the reason and the fix;
// valid names, keys and counts (up to the bound, and a Job's own group
// bounded by its Job) are admitted.
func TestPodGroupValidatorCreate(t *testing.T) {
	long := strings.Repeat("a", 64)
	withTopology := func(keys ...string) *lockv1.PodGroup {
		pg := builders.GangPodGroup("team-a", "g", 2)
		pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
		for _, k := range keys {
			pg.Spec.SchedulingConstraints.Topology = append(pg.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
		}
		return pg
	}
	job := builders.IndexedJob("team-a", "train", 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	job.UID = "job-uid"
	owned := func(minCount int32) *lockv1.PodGroup {
		pg := builders.GangPodGroup("team-a", "train", minCount)
		pg.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}}
		return pg
	}
	for name, tc := range map[string]struct {
		objs       []client.Object
		pg         *lockv1.PodGroup
		wantFields []string
		wantMsg    []string
	}{
		"a name of 63 characters": {pg: builders.GangPodGroup("team-a", long[:63], 2)},
		"a name of 64 characters": {pg: builders.GangPodGroup("team-a", long, 2), wantFields: []string{"metadata.name"},
			wantMsg: []string{"value of its pods' label scheduling.lockstep.dev/pod-group", "must be no more than 63", "choose a name of at most 63 characters"}},
		"zone and a prefixed custom key": {pg: withTopology("topology.kubernetes.io/zone", "example.com/rack")},
		"a key with a space and one with two slashes": {pg: withTopology("topology.kubernetes.io/zone", "rack name", "a/b/c"),
			wantFields: []string{"spec.schedulingConstraints.topology[1].key", "spec.schedulingConstraints.topology[2].key"},
			wantMsg:    []string{"not a valid label key", "use the key of a label your nodes carry"}},
		"a hand-written minCount at the bound": {pg: builders.GangPodGroup("team-a", "g", MaxMinCount)},
		"a hand-written minCount of 1e9": {pg: builders.GangPodGroup("team-a", "g", 1_000_000_000), wantFields: []string{"spec.schedulingPolicy.gang.minCount"},
			wantMsg: []string{"more than 100000, the most pods one workload can run at once", "set minCount to the number of pods that must run together"}},
		"a Job's group of its size": {objs: []client.Object{job}, pg: owned(4)},
		"a Job's group beyond its size": {objs: []client.Object{job}, pg: owned(5), wantFields: []string{"spec.schedulingPolicy.gang.minCount"},
			wantMsg: []string{"larger than Job train can ever run (4 pods at once)"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := groupValidator(tc.objs...).ValidateCreate(context.Background(), tc.pg)
			if diff := cmp.Diff(tc.wantFields, causes(err)); diff != "" {
				t.Errorf("refused fields (-want,+got):\n%s\n%v", diff, err)
			}
			for _, want := range tc.wantMsg {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("want the refusal to say %q, got %v", want, err)
				}
			}
		})
	}
}

// TestPodGroupValidatorUpdate: preemptionPolicy can be neither added,
// removed nor changed; an update that keeps it (a minCount change) passes,
// and so does a minCount within the bound, while one raised past it is
// refused.
func TestPodGroupValidatorUpdate(t *testing.T) {
	group := func(policy *lockv1.PreemptionPolicy, minCount int32) *lockv1.PodGroup {
		pg := builders.GangPodGroup("team-a", "g", minCount)
		pg.Spec.PreemptionPolicy = policy
		return pg
	}
	lower, never := ptr.To(lockv1.PreemptLowerPriority), ptr.To(lockv1.PreemptNever)
	for name, tc := range map[string]struct {
		old, new   *lockv1.PodGroup
		wantFields []string
		wantMsg    string
	}{
		"no policy, minCount changed":     {old: group(nil, 2), new: group(nil, 3)},
		"Never kept, minCount changed":    {old: group(never, 2), new: group(never, 3)},
		"PreemptLowerPriority added":      {old: group(nil, 2), new: group(lower, 2), wantFields: []string{"spec.preemptionPolicy"}, wantMsg: "fixed when it is created (it is unset): restore it, or delete the PodGroup and create it"},
		"Never changed to preempt":        {old: group(never, 2), new: group(lower, 2), wantFields: []string{"spec.preemptionPolicy"}, wantMsg: "(it is Never)"},
		"Never removed":                   {old: group(never, 2), new: group(nil, 2), wantFields: []string{"spec.preemptionPolicy"}, wantMsg: "(it is Never)"},
		"PreemptLowerPriority made Never": {old: group(lower, 2), new: group(never, 2), wantFields: []string{"spec.preemptionPolicy"}, wantMsg: "(it is PreemptLowerPriority)"},
		"minCount raised past the bound":  {old: group(nil, 2), new: group(nil, MaxMinCount+1), wantFields: []string{"spec.schedulingPolicy.gang.minCount"}, wantMsg: "more than 100000"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := groupValidator().ValidateUpdate(context.Background(), tc.old, tc.new)
			if diff := cmp.Diff(tc.wantFields, causes(err)); diff != "" {
				t.Errorf("refused fields (-want,+got):\n%s\n%v", diff, err)
			}
			if tc.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tc.wantMsg)) {
				t.Errorf("want the refusal to say %q, got %v", tc.wantMsg, err)
			}
		})
	}
}

// TestPodJoiningWarnsWhenTheGroupCannotGrantPreemption: a Never pod joining
// a group that says PreemptLowerPriority is told the group will not
// preempt for it; nothing is said when the group sets no policy or the pod
// may preempt.
func TestPodJoiningWarnsWhenTheGroupCannotGrantPreemption(t *testing.T) {
	group := func(policy *lockv1.PreemptionPolicy) *lockv1.PodGroup {
		pg := builders.GangPodGroup("team-a", "g", 2)
		pg.Spec.PreemptionPolicy = policy
		return pg
	}
	pod := func(policy *corev1.PreemptionPolicy) *corev1.Pod {
		p := newMember("p", "g", 0, "")
		p.Spec.PreemptionPolicy = policy
		return p
	}
	const want = "a group cannot grant its pods a preemption their PriorityClass forbids"
	for name, tc := range map[string]struct {
		pg   *lockv1.PodGroup
		pod  *corev1.Pod
		warn bool
	}{
		"a Never pod in a PreemptLowerPriority group":      {pg: group(ptr.To(lockv1.PreemptLowerPriority)), pod: pod(ptr.To(corev1.PreemptNever)), warn: true},
		"a Never pod in a group without a policy":          {pg: group(nil), pod: pod(ptr.To(corev1.PreemptNever))},
		"a preempting pod in a PreemptLowerPriority group": {pg: group(ptr.To(lockv1.PreemptLowerPriority)), pod: pod(ptr.To(corev1.PreemptLowerPriority))},
		"a Never pod in a Never group":                     {pg: group(ptr.To(lockv1.PreemptNever)), pod: pod(ptr.To(corev1.PreemptNever))},
	} {
		t.Run(name, func(t *testing.T) {
			warnings, err := validator(tc.pg).ValidateCreate(context.Background(), tc.pod)
			if err != nil {
				t.Fatalf("want admitted, got %v", err)
			}
			if got := strings.Contains(strings.Join(warnings, "\n"), want); got != tc.warn {
				t.Errorf("warned: want %v, got %v (%q)", tc.warn, got, warnings)
			}
		})
	}
}
