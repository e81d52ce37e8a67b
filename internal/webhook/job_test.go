package webhook

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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
	jobpkg "github.com/lockstep-dev/lockstep/internal/jobintegration/job"
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
				// Its ranks join only a group their job controls.
				gangOf, marked := r.Template.Annotations[lockv1.GangOfAnnotation]
				if want := integ.GVK().Kind + "." + integ.GVK().Group + "/" + tc.obj.GetName(); marked && gangOf != want || marked != (len(tc.want) > 0) {
					t.Errorf("template of role %s: annotation %s=%q (set %v), want %q only on a gang's", r.Name, lockv1.GangOfAnnotation, gangOf, marked, want)
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

// A gang job is refused at creation when a PodGroup of its gang's name
// exists that it would not control — it would never be its gang (issue 28,
// finding 8) —, saying whose it is and what to do; a group an earlier job
// of its kind and name leaves behind is no reason (it goes with that job).
func TestJobValidatorRefusesTakenGroupNames(t *testing.T) {
	newJob := func() *batchv1.Job {
		j := builders.IndexedJob("team-a", "train", 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
		j.UID = "new-uid"
		return j
	}
	group := func() *builders.PodGroupWrapper {
		return builders.MakePodGroup().Namespace("team-a").Name("train").MinCount(2)
	}
	for name, tc := range map[string]struct {
		existing client.Object
		job      *batchv1.Job
		wantErr  string
	}{
		"no group of its name": {job: newJob()},
		"a user's group of its name": {existing: group().Obj(), job: newJob(),
			wantErr: `metadata.name: Forbidden: PodGroup train has no controller (it was created before Job train), so it is not that Job's gang and Lockstep never adopts it: delete PodGroup train and Lockstep creates the Job's own; to keep a group of your own, give it another name and set the label scheduling.lockstep.dev/pod-group on the pod template`},
		"a JobSet's gang of its name": {existing: group().ControlledBy("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "js-uid").Obj(), job: newJob(),
			wantErr: `PodGroup train is the gang of JobSet train, not of Job train: give one of them another name`},
		"an earlier Job's group of its name": {existing: group().ControlledBy("batch/v1", "Job", "train", "old-uid").Obj(), job: newJob()},
		"a Job that is no gang is not concerned": {existing: group().Obj(), job: func() *batchv1.Job {
			j := newJob()
			j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](1), ptr.To[int32](1)
			return j
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(integrations.Scheme())
			if tc.existing != nil {
				b = b.WithObjects(tc.existing)
			}
			c := b.Build()
			v := &JobValidator{reads: testReads(c), Integration: integrationSet.ForKind("batch/v1", "Job")}
			_, err := v.ValidateCreate(context.Background(), tc.job)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.wantErr == "" && got != "" || tc.wantErr != "" && !strings.Contains(got, tc.wantErr) {
				t.Errorf("error %q, want one containing %q", got, tc.wantErr)
			}
			if _, err := v.ValidateUpdate(context.Background(), tc.job, tc.job); err != nil {
				t.Errorf("an update is never refused for it (the job exists; the reconciler says it): %v", err)
			}
		})
	}
}

// A job's topology annotations are checked at admission (keys that are not
// label keys, a device attribute without its domain, refused naming the
// annotation) and fixed once its gang exists (a change is refused).
func TestJobTopologyAnnotations(t *testing.T) {
	job := func(ann map[string]string) *batchv1.Job {
		j := builders.IndexedJob("team-a", "train", 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
		j.UID, j.Annotations = "uid", ann
		return j
	}
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).Build()
	v := &JobValidator{reads: testReads(c), Integration: integrationSet.ForKind("batch/v1", "Job")}
	for name, tc := range map[string]struct {
		ann     map[string]string
		wantErr string
	}{
		"valid": {ann: map[string]string{lockv1.RequiredTopologyAnnotation: "topology.kubernetes.io/zone", lockv1.PreferredTopologyAnnotation: "example.com/rack", lockv1.DeviceTopologyAnnotation: "gpu.example.com/clique"}},
		"a bad required key": {ann: map[string]string{lockv1.RequiredTopologyAnnotation: "zone!"},
			wantErr: `metadata.annotations[scheduling.lockstep.dev/required-topology]: Invalid value: "zone!"`},
		"a device attribute without its domain": {ann: map[string]string{lockv1.DeviceTopologyAnnotation: "clique"},
			wantErr: `metadata.annotations[scheduling.lockstep.dev/device-topology]: Invalid value: "clique"`},
		"preemption terms": {ann: map[string]string{lockv1.PreemptionNoticeAnnotation: "10m", lockv1.MinRuntimeAnnotation: "1h"}},
		"a notice without a unit": {ann: map[string]string{lockv1.PreemptionNoticeAnnotation: "600"},
			wantErr: `metadata.annotations[scheduling.lockstep.dev/preemption-notice]: Invalid value: "600": ` + "scheduling.lockstep.dev/preemption-notice: \"600\" is not a positive duration"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.ValidateCreate(context.Background(), job(tc.ann))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.wantErr == "" && got != "" || tc.wantErr != "" && !strings.Contains(got, tc.wantErr) {
				t.Errorf("error %q, want one containing %q", got, tc.wantErr)
			}
		})
	}
	old := job(map[string]string{lockv1.PreferredTopologyAnnotation: "example.com/rack"})
	changed := job(map[string]string{lockv1.PreferredTopologyAnnotation: "example.com/block"})
	if _, err := v.ValidateUpdate(context.Background(), old, changed); err == nil || !strings.Contains(err.Error(), "the gang's topology is fixed when its PodGroup is created") {
		t.Errorf("changing a live gang's topology: %v", err)
	}
	if _, err := v.ValidateUpdate(context.Background(), job(map[string]string{lockv1.PreemptionNoticeAnnotation: "10m"}), job(map[string]string{lockv1.PreemptionNoticeAnnotation: "20m"})); err == nil || !strings.Contains(err.Error(), "the gang's preemption notice is fixed when its PodGroup is created") {
		t.Errorf("changing a live gang's notice: %v", err)
	}
	if _, err := v.ValidateUpdate(context.Background(), old, old); err != nil {
		t.Errorf("an update that keeps the topology: %v", err)
	}
}

// A Job whose pods Lockstep restarts and preempts whole — its own gang, a
// JobSet's child, a Job naming a group — is given at creation the rule
// that keeps those disruptions out of its backoffLimit, also when created
// with generateName; a Job Lockstep never restarts (another scheduler's,
// one that is no gang) is left exactly as written. What cannot be given
// the rule is warned at creation, on the object the user wrote: a Job
// restarting OnFailure, and a JobSet whose replicated jobs do (JobSet's
// own default).
func TestJobDefaulterKeepsRestartsOutOfTheBudget(t *testing.T) {
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()
	job := func(edit func(*batchv1.Job)) *batchv1.Job {
		j := builders.IndexedJob("team-a", "train", 4, pod)
		if edit != nil {
			edit(j)
		}
		return j
	}
	onFailure := func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = "OnFailure" }
	for name, tc := range map[string]struct {
		job      *batchv1.Job
		want     bool
		warnings int
	}{
		"a gang Job":               {job: job(nil), want: true},
		"a gang Job, generateName": {job: job(func(j *batchv1.Job) { j.Name, j.GenerateName = "", "train-" }), want: true},
		"a JobSet's Job": {job: job(func(j *batchv1.Job) {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "js", Controller: ptr.To(true)}}
		}), want: true},
		"a Job naming a group":            {job: job(func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{lockv1.PodGroupLabel: "shared"} }), want: true},
		"a Job for another scheduler":     {job: job(func(j *batchv1.Job) { j.Spec.Template.Spec.SchedulerName = "" })},
		"a Job of one pod, no gang":       {job: job(func(j *batchv1.Job) { j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](1), ptr.To[int32](1) })},
		"a gang Job restarting OnFailure": {job: job(onFailure), warnings: 1},
	} {
		t.Run(name, func(t *testing.T) {
			integ := integrationSet.ForKind("batch/v1", "Job")
			j := tc.job
			if err := (JobDefaulter{Integration: integ}).Default(context.Background(), j); err != nil {
				t.Fatal(err)
			}
			if got := j.Spec.PodFailurePolicy != nil; got != tc.want {
				t.Errorf("podFailurePolicy set: %v, want %v (%+v)", got, tc.want, j.Spec.PodFailurePolicy)
			}
			if got := j.Annotations[jobpkg.RestartBudgetDefaultedAnnotation] != ""; got != tc.want {
				t.Errorf("annotation %s set: %v, want %v", jobpkg.RestartBudgetDefaultedAnnotation, got, tc.want)
			}
			c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).Build()
			v := &JobValidator{reads: testReads(c), Integration: integ}
			warnings, err := v.ValidateCreate(context.Background(), j)
			if err != nil {
				t.Fatal(err)
			}
			var budget []string
			for _, w := range warnings {
				if strings.Contains(w, "backoffLimit") {
					budget = append(budget, w)
				}
			}
			if len(budget) != tc.warnings {
				t.Errorf("want %d restart-budget warnings, got %q", tc.warnings, budget)
			}
		})
	}
	t.Run("a JobSet whose workers restart OnFailure", func(t *testing.T) {
		workers := builders.ReplicatedJob("workers", 2, 2, pod)
		workers.Template.Spec.Template.Spec.RestartPolicy = "OnFailure"
		js := builders.JobSet("team-a", "llm", builders.ReplicatedJob("driver", 1, 1, pod), workers)
		c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).Build()
		v := &JobValidator{reads: testReads(c), Integration: integrationSet.ForKind(jobsetv1.GroupVersion.String(), "JobSet")}
		warnings, err := v.ValidateCreate(context.Background(), js)
		if err != nil {
			t.Fatal(err)
		}
		want := "replicated job workers has restartPolicy OnFailure, which allows no podFailurePolicy"
		var found int
		for _, w := range warnings {
			if strings.Contains(w, "backoffLimit") {
				found++
				if !strings.Contains(w, want) || !strings.Contains(w, "restarts the JobSet") {
					t.Errorf("warning %q, want one containing %q and what it costs the JobSet", w, want)
				}
			}
		}
		if found != 1 {
			t.Errorf("want one restart-budget warning (workers), got %q", warnings)
		}
	})
}

// Where the API server drops spec.schedulingGroup, the group a Job's
// template names through it is kept as the membership label (the field is
// gone after admission); a label of its own is left alone, and where the
// field is served nothing is added.
func TestJobDefaulterKeepsTheGroupSchedulingGroupNames(t *testing.T) {
	job := func(label string) *batchv1.Job {
		pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("hand")}
		if label != "" {
			pod.Labels = map[string]string{lockv1.PodGroupLabel: label}
		}
		return builders.IndexedJob("team-a", "train", 2, pod)
	}
	for name, tc := range map[string]struct {
		drops bool
		label string
		want  string
	}{
		"dropped: kept as the label":  {drops: true, want: "hand"},
		"dropped, with its own label": {drops: true, label: "mine", want: "mine"},
		"served: nothing added":       {drops: false, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			j := job(tc.label)
			d := JobDefaulter{Integration: integrationSet.ForKind("batch/v1", "Job"), DropsSchedulingGroup: tc.drops}
			if err := d.Default(context.Background(), j); err != nil {
				t.Fatal(err)
			}
			if got := j.Spec.Template.Labels[lockv1.PodGroupLabel]; got != tc.want {
				t.Errorf("template label %q, want %q", got, tc.want)
			}
		})
	}
}

// A Job asking Kueue's topology-aware scheduling for a topology is warned,
// naming both: beside Lockstep's own topology (Kueue pins each pod first,
// so they may disagree), or for pods that claim DRA devices (Kueue's
// choice does not see them). Without either, or with Kueue's
// unconstrained annotation, nothing is said.
func TestJobWithKueueTopologyIsWarned(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).Build()
	v := &JobValidator{reads: testReads(c), Integration: integrationSet.ForKind("batch/v1", "Job")}
	const rack = "cloud.provider.com/topology-rack"
	for name, tc := range map[string]struct {
		ann, podAnn map[string]string
		claims      bool
		want        []string
	}{
		"both topologies": {
			ann:    map[string]string{lockv1.RequiredTopologyAnnotation: "topology.kubernetes.io/zone"},
			podAnn: map[string]string{"kueue.x-k8s.io/podset-required-topology": rack},
			want: []string{"spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]: Kueue's topology-aware scheduling (kueue.x-k8s.io/podset-required-topology: " + rack +
				") and Lockstep's topology (scheduling.lockstep.dev/required-topology: topology.kubernetes.io/zone) both constrain this job, and Kueue's wins"},
		},
		"Kueue's topology for DRA pods": {
			podAnn: map[string]string{"kueue.x-k8s.io/podset-preferred-topology": rack}, claims: true,
			want: []string{"Kueue's topology-aware scheduling (kueue.x-k8s.io/podset-preferred-topology: " + rack + ") pins each pod to a node without seeing DRA devices",
				"annotate the job scheduling.lockstep.dev/preferred-topology: " + rack + " and remove kueue.x-k8s.io/podset-preferred-topology"},
		},
		"Kueue's topology alone, no devices": {podAnn: map[string]string{"kueue.x-k8s.io/podset-required-topology": rack}},
		"Kueue unconstrained beside Lockstep's": {
			ann:    map[string]string{lockv1.RequiredTopologyAnnotation: "topology.kubernetes.io/zone"},
			podAnn: map[string]string{"kueue.x-k8s.io/podset-unconstrained-topology": "true"}, claims: true,
		},
		"Lockstep's alone": {ann: map[string]string{lockv1.RequiredTopologyAnnotation: rack}, claims: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := builders.MakePod().Scheduler(lockv1.SchedulerName)
			if tc.claims {
				pod = pod.ClaimTemplate("gpu", "one-gpu")
			}
			j := builders.IndexedJob("team-a", "train", 4, pod.Obj())
			j.UID, j.Annotations, j.Spec.Template.Annotations = "uid", tc.ann, tc.podAnn
			warnings, err := v.ValidateCreate(context.Background(), j)
			if err != nil {
				t.Fatal(err)
			}
			var kueue []string
			for _, w := range warnings {
				if strings.Contains(w, "Kueue's topology-aware scheduling") {
					kueue = append(kueue, w)
				}
			}
			if len(tc.want) == 0 && len(kueue) > 0 {
				t.Errorf("warned: %q", kueue)
			}
			all := strings.Join(kueue, "\n")
			for _, want := range tc.want {
				if !strings.Contains(all, want) {
					t.Errorf("warnings %q: want one containing %q", all, want)
				}
			}
		})
	}
}
