package podgroup_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// Who is a member of a group that a pod names: a job's rank only of the
// group its job controls, a Job's group only that Job's pods, anything
// else as before.
func TestAdmits(t *testing.T) {
	group := func() *builders.PodGroupWrapper {
		return builders.MakePodGroup().Namespace("ns").Name("train").MinCount(2)
	}
	rank := func(owner string, uid types.UID, gangOf string) *corev1.Pod {
		w := builders.MakePod().Namespace("ns").Name("train-0").Member("train")
		if gangOf != "" {
			w.Annotation(lockv1.GangOfAnnotation, gangOf)
		}
		p := w.Obj()
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: owner, UID: uid, Controller: ptr.To(true)}}
		}
		return p
	}
	for name, tc := range map[string]struct {
		pg   *lockv1.PodGroup
		pod  *corev1.Pod
		want bool
	}{
		"no group yet":                                     {pod: rank("train", "a", "Job.batch/train"), want: true},
		"the user's group takes the user's pods":           {pg: group().Obj(), pod: builders.MakePod().Member("train").Obj(), want: true},
		"the user's group takes a job's pods that name it": {pg: group().Obj(), pod: rank("other", "b", ""), want: true},
		// Issue 28 finding 8: a group created before the Job of its name.
		"a user's group of a gang Job's name is not the Job's gang": {pg: group().Obj(), pod: rank("train", "a", "Job.batch/train")},
		"another kind's group of the same name is not the Job's gang": {
			pg: group().ControlledBy("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "js").Obj(), pod: rank("train", "a", "Job.batch/train"),
		},
		"a JobSet's gang takes its ranks (controlled by its Jobs)": {
			pg: group().ControlledBy("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "js").Obj(), pod: rank("train-workers-0", "c", "JobSet.jobset.x-k8s.io/train"), want: true,
		},
		"a Job's gang takes its ranks":                               {pg: group().ControlledBy("batch/v1", "Job", "train", "a").Obj(), pod: rank("train", "a", "Job.batch/train"), want: true},
		"a Job's gang takes its pods written before the annotation":  {pg: group().ControlledBy("batch/v1", "Job", "train", "a").Obj(), pod: rank("train", "a", ""), want: true},
		"a Job's gang takes no rank of a Job of its name made again": {pg: group().ControlledBy("batch/v1", "Job", "train", "a").Obj(), pod: rank("train", "new", "Job.batch/train")},
		"a Job's gang takes no other pod":                            {pg: group().ControlledBy("batch/v1", "Job", "train", "a").Obj(), pod: builders.MakePod().Member("train").Obj()},
	} {
		t.Run(name, func(t *testing.T) {
			if got := podgroup.Admits(tc.pg, tc.pod); got != tc.want {
				t.Errorf("Admits = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGangOf(t *testing.T) {
	for want, ref := range map[string]metav1.OwnerReference{
		"Job.batch/train":            {APIVersion: "batch/v1", Kind: "Job", Name: "train"},
		"JobSet.jobset.x-k8s.io/llm": {APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "llm"},
		"Pod/p":                      {APIVersion: "v1", Kind: "Pod", Name: "p"},
		"":                           {APIVersion: "a/b/c", Kind: "Job", Name: "x"},
	} {
		if got := podgroup.GangOf(&ref); got != want {
			t.Errorf("GangOf(%s %s %s) = %q, want %q", ref.APIVersion, ref.Kind, ref.Name, got, want)
		}
	}
}
