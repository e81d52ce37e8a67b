package webhook

import (
	"context"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// The job defaulter writes a group into a template exactly when the job
// reconciler makes that group: both ask jobintegration's one Classify, so a
// rank is never created in a group that will not exist, nor a gang made
// whose pods arrive without it.
func TestJobDefaulterAgreesWithTheReconciler(t *testing.T) {
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()
	job := func(n int32, edit func(*batchv1.Job)) client.Object {
		j := builders.IndexedJob("team-a", "train", n, pod)
		j.UID = "train-uid"
		if edit != nil {
			edit(j)
		}
		return j
	}
	for name, tc := range map[string]struct {
		obj  client.Object
		want []string
	}{
		"a gang Job":           {obj: job(4, nil), want: []string{"train"}},
		"a Job of one pod":     {obj: job(1, nil)},
		"a Job naming a group": {obj: job(4, func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{lockv1.PodGroupLabel: "shared"} })},
		"a Job with a bad mode": {obj: job(4, func(j *batchv1.Job) {
			j.Annotations = map[string]string{jobintegration.DisruptionModeAnnotation: "some"}
		})},
		"a Job for another scheduler": {obj: job(4, func(j *batchv1.Job) { j.Spec.Template.Spec.SchedulerName = "" })},
		"a JobSet's Job": {obj: job(4, func(j *batchv1.Job) {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "js", Controller: ptr.To(true)}}
		})},
		"a JobSet, a gang per role": {obj: func() client.Object {
			js := builders.JobSet("team-a", "llm", builders.ReplicatedJob("driver", 1, 1, pod), builders.ReplicatedJob("workers", 2, 2, pod))
			js.Annotations = map[string]string{jobintegration.GangScopeAnnotation: jobintegration.ScopeRole}
			js.UID = "llm-uid"
			return js
		}(), want: []string{"llm-driver", "llm-workers"}},
	} {
		t.Run(name, func(t *testing.T) {
			integ := integrationSet.ForKind("batch/v1", "Job")
			if _, ok := tc.obj.(*jobsetv1.JobSet); ok {
				integ = integrationSet.ForKind(jobsetv1.GroupVersion.String(), "JobSet")
			}
			// The defaulter, at the job's creation.
			defaulted := tc.obj.DeepCopyObject().(client.Object)
			if err := (JobDefaulter{Integration: integ}).Default(context.Background(), defaulted); err != nil {
				t.Fatal(err)
			}
			var labelled []string
			for _, r := range integ.Wrap(defaulted).Roles() {
				if g := r.Template.Labels[lockv1.PodGroupLabel]; g != "" && g != "shared" {
					labelled = append(labelled, g)
				}
			}
			// The reconciler, once the job exists.
			c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(tc.obj).Build()
			r := &jobintegration.Reconciler{Client: c, Recorder: record.NewFakeRecorder(10), Integration: integ, Integrations: integrationSet}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: tc.obj.GetName()}}); err != nil {
				t.Fatal(err)
			}
			list := &lockv1.PodGroupList{}
			if err := c.List(context.Background(), list); err != nil {
				t.Fatal(err)
			}
			var made []string
			for _, pg := range list.Items {
				made = append(made, pg.Name)
			}
			sort.Strings(labelled)
			sort.Strings(made)
			if d := cmp.Diff(tc.want, labelled); d != "" {
				t.Errorf("groups written into the templates (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.want, made); d != "" {
				t.Errorf("PodGroups made (-want,+got):\n%s", d)
			}
		})
	}
}
