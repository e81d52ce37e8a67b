package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/job"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/jobset"
	"github.com/lockstep-dev/lockstep/test/builders"
)

func jobValidator(integ jobintegration.Integration, objs ...client.Object) *JobValidator {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(objs...).
		Build()
	return &JobValidator{reads: testReads(c), Integration: integ}
}

// lockstepJob is a gang Job of n ranks whose template names group (as the
// Job mutation writes a gang's own group, or as a user names another).
func lockstepJob(name, uid string, n int32, group string) *batchv1.Job {
	p := builders.MakePod().Scheduler(lockv1.SchedulerName)
	if group != "" {
		p = p.Member(group)
	}
	j := builders.IndexedJob("team-a", name, n, p.Obj())
	j.UID = types.UID(uid)
	return j
}

// TestJobNamingAnotherJobsGroup: a Job whose template names a group
// another Job's gang has — or will have, its PodGroup not created yet — is
// refused with the field, the reason and the fix, whether it names it by
// label or by spec.schedulingGroup; a group nobody has yet is a warning;
// its own gang, a hand-written group and a JobSet's own role gangs are
// neither.
func TestJobNamingAnotherJobsGroup(t *testing.T) {
	train := lockstepJob("train", "train-uid", 4, "train")
	trainGroup := builders.GangPodGroup("team-a", "train", 4)
	trainGroup.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "train-uid", Controller: ptr.To(true)}}
	solo := lockstepJob("solo", "solo-uid", 1, "") // parallelism 1: not a gang, makes no group
	labelOnly := builders.IndexedJob("team-a", "b", 2, builders.MakePod().Scheduler(corev1.DefaultSchedulerName).Member("train").Obj())
	labelOnly.UID = "b-uid"
	bySchedulingGroup := lockstepJob("b", "b-uid", 2, "")
	bySchedulingGroup.Spec.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
	label := "spec.template.metadata.labels[scheduling.lockstep.dev/pod-group]"
	for name, tc := range map[string]struct {
		objs       []client.Object
		job        *batchv1.Job
		wantFields []string
		wantMsg    string
		wantWarn   string
	}{
		"another Job's gang, created": {objs: []client.Object{train, trainGroup}, job: lockstepJob("b", "b-uid", 2, "train"),
			wantFields: []string{label}, wantMsg: "PodGroup train is the gang of Job train: only its pods join it, so this Job's pods would wait for ever; remove the label"},
		"another Job's gang, not created yet": {objs: []client.Object{train}, job: lockstepJob("b", "b-uid", 2, "train"),
			wantFields: []string{label}, wantMsg: "PodGroup train will be the gang of Job train (Lockstep creates it for that Job)"},
		"another Job's gang, by spec.schedulingGroup": {objs: []client.Object{train}, job: bySchedulingGroup,
			wantFields: []string{"spec.template.spec.schedulingGroup.podGroupName"}, wantMsg: "will be the gang of Job train"},
		"another Job's gang, named by a Job for another scheduler": {objs: []client.Object{train, trainGroup}, job: labelOnly,
			wantFields: []string{label}, wantMsg: "PodGroup train is the gang of Job train"},
		"a group nobody has": {objs: []client.Object{solo}, job: lockstepJob("b", "b-uid", 2, "solo"),
			wantWarn: "names PodGroup solo, which does not exist: the Job's pods wait, unscheduled, until it is created"},
		"a hand-written group":        {objs: []client.Object{builders.GangPodGroup("team-a", "mine", 2)}, job: lockstepJob("b", "b-uid", 2, "mine")},
		"its own gang":                {objs: []client.Object{train}, job: lockstepJob("b", "b-uid", 2, "b")},
		"the Job itself, re-admitted": {objs: []client.Object{train, trainGroup}, job: train},
	} {
		t.Run(name, func(t *testing.T) {
			warnings, err := jobValidator(job.Integration{}, tc.objs...).ValidateCreate(context.Background(), tc.job)
			if diff := cmp.Diff(tc.wantFields, causes(err)); diff != "" {
				t.Errorf("refused fields (-want,+got):\n%s\n%v", diff, err)
			}
			if tc.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tc.wantMsg)) {
				t.Errorf("want the refusal to say %q, got %v", tc.wantMsg, err)
			}
			all := strings.Join(warnings, "\n")
			if tc.wantWarn != "" && !strings.Contains(all, tc.wantWarn) {
				t.Errorf("want a warning %q, got %q", tc.wantWarn, warnings)
			}
			if tc.wantWarn == "" && strings.Contains(all, "PodGroup") {
				t.Errorf("want no warning about groups, got %q", warnings)
			}
		})
	}
}

// TestJobWhoseGangAnotherJobNames: a gang Job created after another Job's
// template named its gang is admitted with a warning saying whose pods will
// wait; nothing is said when no other Job names it.
func TestJobWhoseGangAnotherJobNames(t *testing.T) {
	early := lockstepJob("early", "early-uid", 2, "late")
	late := lockstepJob("late", "late-uid", 2, "")
	warnings, err := jobValidator(job.Integration{}, early).ValidateCreate(context.Background(), late)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Job early's spec.template.metadata.labels[scheduling.lockstep.dev/pod-group] names PodGroup late, which will be this Job's gang: its pods never join another job's gang"; !strings.Contains(strings.Join(warnings, "\n"), want) {
		t.Errorf("want a warning %q, got %q", want, warnings)
	}
	warnings, err = jobValidator(job.Integration{}, lockstepJob("other", "other-uid", 2, "other")).ValidateCreate(context.Background(), late)
	if err != nil || len(warnings) > 0 {
		t.Errorf("nobody names its gang: want no warning, got %q (%v)", warnings, err)
	}
}

// TestJobSetOwnRoleGangsAreNotAnothers: a JobSet with gang-scope role whose
// templates carry its own role gangs (as its mutation wrote them) is
// admitted without a word about groups.
func TestJobSetOwnRoleGangsAreNotAnothers(t *testing.T) {
	js := builders.JobSet("team-a", "trainer",
		builders.ReplicatedJob("driver", 1, 1, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()),
		builders.ReplicatedJob("workers", 2, 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()))
	js.Annotations = map[string]string{jobintegration.GangScopeAnnotation: jobintegration.ScopeRole}
	if err := (JobDefaulter{Integration: jobset.Integration{}}).Default(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	warnings, err := jobValidator(jobset.Integration{}).ValidateCreate(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(warnings, "\n"); strings.Contains(all, "PodGroup") {
		t.Errorf("want no warning about groups, got %q", warnings)
	}
}
