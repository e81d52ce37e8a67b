package integrations

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kfv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// lockstepJob is an Indexed Job of n pods targeting Lockstep, changed by
// edit.
func lockstepJob(n int32, edit func(*batchv1.Job)) *batchv1.Job {
	j := builders.IndexedJob("team-a", "train", n, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	if edit != nil {
		edit(j)
	}
	return j
}

// What Lockstep makes of a job, asked once for the reconciler and the
// defaulters: every class, in the order the questions are asked, and the
// gangs with their groups and disruption mode.
func TestClassify(t *testing.T) {
	all := All()
	modeAll := &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}}
	modeSingle := &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	type want struct {
		Class     jobintegration.Class
		Parent    string
		Condition string
		Named     string
		Groups    []jobintegration.Group
		Mode      *lockv1.DisruptionMode
	}
	workers := func(name string, minCount, size int32) []jobintegration.Group {
		return []jobintegration.Group{{Name: name, Template: jobintegration.TemplateName, MinCount: minCount, Size: size, Roles: []string{jobintegration.TemplateName}}}
	}
	for name, tc := range map[string]struct {
		obj  client.Object
		want want
	}{
		"a Job for the default scheduler": {
			obj:  lockstepJob(4, func(j *batchv1.Job) { j.Spec.Template.Spec.SchedulerName = "" }),
			want: want{Class: jobintegration.ClassNotLockstep},
		},
		"a JobSet's Job, even with no gang shape of its own": {
			obj: lockstepJob(1, func(j *batchv1.Job) {
				j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "js", Controller: ptr.To(true)}}
			}),
			want: want{Class: jobintegration.ClassChild, Parent: "JobSet"},
		},
		"a Job with an in-tree gang policy, even with a bad annotation": {
			obj: lockstepJob(4, func(j *batchv1.Job) {
				j.Annotations = map[string]string{jobintegration.MinCountAnnotation: "9"}
				j.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
					Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](4)}}}
			}),
			want: want{Class: jobintegration.ClassInTree},
		},
		"a Job whose template names a group": {
			obj:  lockstepJob(4, func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{lockv1.PodGroupLabel: "shared"} }),
			want: want{Class: jobintegration.ClassNamed, Condition: "the pod template names PodGroup shared", Named: "shared"},
		},
		"a Job whose template names a group in spec.schedulingGroup": {
			obj: lockstepJob(4, func(j *batchv1.Job) {
				j.Spec.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("upstream")}
			}),
			want: want{Class: jobintegration.ClassNamed, Condition: "the pod template names PodGroup upstream", Named: "upstream"},
		},
		"a Job of one pod": {
			obj:  lockstepJob(1, nil),
			want: want{Class: jobintegration.ClassNotQualified, Condition: "parallelism is 1"},
		},
		"a Job whose min-count exceeds it": {
			obj:  lockstepJob(4, func(j *batchv1.Job) { j.Annotations = map[string]string{jobintegration.MinCountAnnotation: "5"} }),
			want: want{Class: jobintegration.ClassNotQualified, Condition: jobintegration.MinCountAnnotation + "=5 is larger than the job can ever run (4 pods at once)"},
		},
		"a Job with an unknown disruption mode": {
			obj: lockstepJob(4, func(j *batchv1.Job) {
				j.Annotations = map[string]string{jobintegration.DisruptionModeAnnotation: "some"}
			}),
			want: want{Class: jobintegration.ClassNotQualified, Condition: jobintegration.DisruptionModeAnnotation + `="some" is not a disruption mode`},
		},
		"a gang Job": {
			obj:  lockstepJob(4, nil),
			want: want{Class: jobintegration.ClassGang, Groups: workers("train", 4, 4), Mode: modeAll},
		},
		"a gang Job whose template already carries its own group (its defaulting ran)": {
			obj: lockstepJob(4, func(j *batchv1.Job) {
				j.Spec.Template.Labels = map[string]string{lockv1.PodGroupLabel: "train"}
				j.Annotations = map[string]string{jobintegration.MinCountAnnotation: "3", jobintegration.DisruptionModeAnnotation: "single"}
			}),
			want: want{Class: jobintegration.ClassGang, Groups: workers("train", 3, 4), Mode: modeSingle},
		},
		"a JobSet of two replicated jobs, a gang per role": {
			obj: func() client.Object {
				pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()
				js := builders.JobSet("team-a", "llm", builders.ReplicatedJob("driver", 1, 1, pod), builders.ReplicatedJob("workers", 2, 2, pod))
				js.Annotations = map[string]string{jobintegration.GangScopeAnnotation: jobintegration.ScopeRole}
				return js
			}(),
			want: want{Class: jobintegration.ClassGang, Mode: modeAll, Groups: []jobintegration.Group{
				{Name: "llm-driver", Template: "driver", MinCount: 1, Size: 1, Roles: []string{"driver"}},
				{Name: "llm-workers", Template: "workers", MinCount: 4, Size: 4, Roles: []string{"workers"}},
			}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			gvk := tc.obj.GetObjectKind().GroupVersionKind()
			integ := all.ForKind("batch/v1", "Job")
			if _, ok := tc.obj.(*jobsetv1.JobSet); ok {
				integ = all.ForKind(gvk.GroupVersion().String(), gvk.Kind)
			}
			c := all.Classify(integ.Wrap(tc.obj))
			got := want{Class: c.Class, Groups: c.Groups, Mode: c.Mode}
			if c.Parent != nil {
				got.Parent = c.Parent.GVK().Kind
			}
			if c.Why != nil {
				got.Condition, got.Named = c.Why.Condition, c.Why.Named
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Classify (-want,+got):\n%s", d)
			}
			if gang := all.Gang(integ.Wrap(tc.obj)); gang != (tc.want.Class == jobintegration.ClassGang) {
				t.Errorf("Gang = %v for class %v", gang, c.Class)
			}
		})
	}
}

// Every kind that says it stopped with a suspend flag and status conditions
// answers through one StoppedBy: suspended wins; the first True condition
// of a finishing type decides; False ones and others are ignored.
func TestStopped(t *testing.T) {
	type answer struct {
		Why               string
		Failed, Suspended bool
	}
	all := All()
	job := func(suspend bool, conds ...batchv1.JobCondition) client.Object {
		return lockstepJob(2, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(suspend); j.Status.Conditions = conds })
	}
	jobSet := func(suspend bool, conds ...metav1.Condition) client.Object {
		js := builders.JobSet("team-a", "js")
		js.Spec.Suspend = ptr.To(suspend)
		js.Status.Conditions = conds
		return js
	}
	mpi := func(conds ...mpiv2.JobCondition) client.Object {
		return &mpiv2.MPIJob{Status: mpiv2.JobStatus{Conditions: conds}}
	}
	pytorch := func(conds ...kfv1.JobCondition) client.Object {
		return &kfv1.PyTorchJob{Status: kfv1.JobStatus{Conditions: conds}}
	}
	for name, tc := range map[string]struct {
		kind string
		obj  client.Object
		want answer
	}{
		"a running Job":                        {kind: "Job", obj: job(false)},
		"a suspended Job":                      {kind: "Job", obj: job(true, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}), want: answer{Why: "suspended", Suspended: true}},
		"a Job whose success criteria are met": {kind: "Job", obj: job(false, batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}), want: answer{Why: "complete"}},
		"a Job about to fail":                  {kind: "Job", obj: job(false, batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}), want: answer{Why: "failed: BackoffLimitExceeded", Failed: true}},
		"a Job whose Failed is False":          {kind: "Job", obj: job(false, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionFalse})},
		"a completed JobSet":                   {kind: "JobSet", obj: jobSet(false, metav1.Condition{Type: string(jobsetv1.JobSetCompleted), Status: metav1.ConditionTrue}), want: answer{Why: "complete"}},
		"a failed JobSet":                      {kind: "JobSet", obj: jobSet(false, metav1.Condition{Type: string(jobsetv1.JobSetFailed), Status: metav1.ConditionTrue, Reason: "FailurePolicy"}), want: answer{Why: "failed: FailurePolicy", Failed: true}},
		"a suspended JobSet":                   {kind: "JobSet", obj: jobSet(true), want: answer{Why: "suspended", Suspended: true}},
		"a succeeded MPIJob":                   {kind: "MPIJob", obj: mpi(mpiv2.JobCondition{Type: mpiv2.JobSucceeded, Status: corev1.ConditionTrue}), want: answer{Why: "complete"}},
		"a failed PyTorchJob":                  {kind: "PyTorchJob", obj: pytorch(kfv1.JobCondition{Type: kfv1.JobFailed, Status: corev1.ConditionTrue, Reason: "Evicted"}), want: answer{Why: "failed: Evicted", Failed: true}},
	} {
		t.Run(name, func(t *testing.T) {
			var integ jobintegration.Integration
			for _, i := range all {
				if i.GVK().Kind == tc.kind {
					integ = i
				}
			}
			var got answer
			got.Why, got.Failed, got.Suspended = integ.Wrap(tc.obj).Stopped()
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Stopped (-want,+got):\n%s", d)
			}
		})
	}
}
