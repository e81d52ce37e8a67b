package jobintegration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// recorder keeps the events, with the kind and name of their object.
type recorder struct{ events []string }

func (r *recorder) Event(o runtime.Object, typ, reason, msg string) {
	m := o.(client.Object)
	kind := "Job"
	if _, ok := o.(*lockv1.PodGroup); ok {
		kind = "PodGroup"
	} else if _, ok := o.(*lockv1.Workload); ok {
		kind = "Workload"
	}
	r.events = append(r.events, fmt.Sprintf("%s %s: %s %s: %s", kind, m.GetName(), typ, reason, msg))
}

func (r *recorder) Eventf(o runtime.Object, typ, reason, format string, args ...any) {
	r.Event(o, typ, reason, fmt.Sprintf(format, args...))
}

func (r *recorder) AnnotatedEventf(o runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	r.Eventf(o, typ, reason, format, args...)
}

func gangJob() *batchv1.Job {
	j := builders.IndexedJob("team-a", "train", 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	j.UID = "train-uid"
	return j
}

func newReconciler(objs ...client.Object) (*jobintegration.Reconciler, *recorder) {
	all := integrations.All()
	r := &jobintegration.Reconciler{Recorder: &recorder{}, Integration: all.ForKind("batch/v1", "Job"), Integrations: all}
	r.Client = fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(objs...).
		WithIndex(&batchv1.Job{}, jobintegration.IndexWanted, r.Wanted).Build()
	return r, r.Recorder.(*recorder)
}

// A job's gang is only a group it controls: a PodGroup or Workload of its
// name that it does not control is never adopted, changed or used — it is
// left as it is, and the Job and the object say why and what to do (issue
// 28, finding 8). One it controls is kept in step with it.
func TestReconcileNeverAdopts(t *testing.T) {
	user := func() *lockv1.PodGroup {
		return builders.MakePodGroup().Namespace("team-a").Name("train").MinCount(2).Obj()
	}
	type want struct {
		// PodGroup train's minCount and controller afterwards, and
		// Workload train's controller ("absent": none of the name).
		MinCount   int32
		Controller string
		Workload   string
		Events     []string
	}
	for name, tc := range map[string]struct {
		existing []client.Object
		want     want
	}{
		"nothing of its name": {
			want: want{MinCount: 4, Controller: "Job train train-uid", Workload: "Job train train-uid", Events: []string{
				"Job train: Normal GangCreated: created PodGroup train (gang, minCount 4) and Workload train"}},
		},
		"its own group follows it": {
			existing: []client.Object{
				builders.MakePodGroup().Namespace("team-a").Name("train").MinCount(3).ControlledBy("batch/v1", "Job", "train", "train-uid").Obj(),
				&lockv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", OwnerReferences: gangJobRef("train-uid")}},
			},
			want: want{MinCount: 4, Controller: "Job train train-uid", Workload: "Job train train-uid"},
		},
		"a user's PodGroup made before the Job": {
			existing: []client.Object{user()},
			want: want{MinCount: 2, Controller: "", Workload: "Job train train-uid", Events: []string{
				"Job train: Warning NotControlled: PodGroup train is not this Job's: it has no controller (it was created before the Job, by hand or by another tool). Lockstep does not use it for the Job and its pods do not join it; the Job waits: delete PodGroup train and Lockstep creates the Job's own; to keep a group of your own, give it another name and set the label scheduling.lockstep.dev/pod-group: <its name> on the pod template",
				"PodGroup train: Warning NotControlled: Job train wants a PodGroup of this name, but Job does not control this one: it has no controller (it was created before the Job, by hand or by another tool). Lockstep does not use it for the Job and its pods do not join it; delete PodGroup train and Lockstep creates the Job's own; to keep a group of your own, give it another name and set the label scheduling.lockstep.dev/pod-group: <its name> on the pod template",
			}},
		},
		"a JobSet's gang of the same name": {
			existing: []client.Object{builders.MakePodGroup().Namespace("team-a").Name("train").MinCount(8).ControlledBy("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "js-uid").Obj()},
			want: want{MinCount: 8, Controller: "JobSet train js-uid", Workload: "Job train train-uid", Events: []string{
				"Job train: Warning NotControlled: PodGroup train is not this Job's: it is controlled by JobSet train. Lockstep does not use it for the Job and its pods do not join it; the Job waits: give the Job or JobSet train another name",
				"PodGroup train: Warning NotControlled: Job train wants a PodGroup of this name, but Job does not control this one: it is controlled by JobSet train. Lockstep does not use it for the Job and its pods do not join it; give the Job or JobSet train another name",
			}},
		},
		"an earlier Job's of the same name, on its way out": {
			existing: []client.Object{builders.MakePodGroup().Namespace("team-a").Name("train").MinCount(3).ControlledBy("batch/v1", "Job", "train", "old-uid").Obj()},
			want: want{MinCount: 3, Controller: "Job train old-uid", Workload: "Job train train-uid", Events: []string{
				"Job train: Normal NotControlled: PodGroup train belongs to an earlier Job train (uid old-uid) and is deleted with it; this Job's is created then"}},
		},
		"a user's Workload: no group either": {
			existing: []client.Object{&lockv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train"}}},
			want: want{Controller: "absent", Events: []string{
				"Job train: Warning NotControlled: Workload train is not this Job's: it has no controller (it was created before the Job, by hand or by another tool). Lockstep does not use it for the Job and its pods do not join it; the Job waits: delete Workload train and Lockstep creates the Job's own",
				"Workload train: Warning NotControlled: Job train wants a Workload of this name, but Job does not control this one: it has no controller (it was created before the Job, by hand or by another tool). Lockstep does not use it for the Job and its pods do not join it; delete Workload train and Lockstep creates the Job's own",
			}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r, rec := newReconciler(append(tc.existing, gangJob())...)
			ctx := context.Background()
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "train"}}); err != nil {
				t.Fatal(err)
			}
			got := want{Controller: "absent", Workload: "absent"}
			pg := &lockv1.PodGroup{}
			if err := r.Client.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "train"}, pg); err == nil {
				got.MinCount, got.Controller = pg.Spec.SchedulingPolicy.Gang.MinCount, controller(pg)
			}
			wl := &lockv1.Workload{}
			if err := r.Client.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "train"}, wl); err == nil {
				got.Workload = controller(wl)
			}
			got.Events = rec.events
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func gangJobRef(uid types.UID) []metav1.OwnerReference {
	t := true
	return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: uid, Controller: &t}}
}

// controller names o's controller, "" for none.
func controller(o metav1.Object) string {
	ref := metav1.GetControllerOf(o)
	if ref == nil {
		return ""
	}
	return strings.Join([]string{ref.Kind, ref.Name, string(ref.UID)}, " ")
}

// A PodGroup or Workload that is created or deleted brings the jobs that
// want its name: the Job whose group name was taken gets its group once
// the name is free. Jobs that are no gang want no name.
func TestWantingMapsNamesToJobs(t *testing.T) {
	other := gangJob()
	other.Name, other.UID = "other", "other-uid"
	single := gangJob()
	single.Name, single.Spec.Parallelism, single.Spec.Completions = "single", ptrTo(int32(1)), ptrTo(int32(1))
	r, _ := newReconciler(gangJob(), other, single)
	for name, want := range map[string][]reconcile.Request{
		"train":  {{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "train"}}},
		"other":  {{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "other"}}},
		"single": nil,
		"nobody": nil,
	} {
		pg := builders.MakePodGroup().Namespace("team-a").Name(name).Obj()
		if d := cmp.Diff(want, r.Wanting(context.Background(), pg)); d != "" {
			t.Errorf("PodGroup %s (-want,+got):\n%s", name, d)
		}
	}
	elsewhere := builders.MakePodGroup().Namespace("team-b").Name("train").Obj()
	if got := r.Wanting(context.Background(), elsewhere); len(got) != 0 {
		t.Errorf("a PodGroup of another namespace brought %v", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A job's topology annotations give its gang's PodGroup (and Workload
// template) their topology: the required keys as
// spec.schedulingConstraints.topology, the preferred ones and the device
// attribute as Lockstep's annotations; a job without them gets none.
func TestTopologyAnnotationsReachTheGang(t *testing.T) {
	for name, tc := range map[string]struct {
		ann            map[string]string
		activeDeadline int64
		wantRequired   []string
		wantAnnotation map[string]string
	}{
		"none": {},
		"required, preferred, device and capacity types": {
			ann: map[string]string{
				lockv1.RequiredTopologyAnnotation:  "topology.kubernetes.io/zone",
				lockv1.PreferredTopologyAnnotation: "example.com/rack, example.com/block",
				lockv1.DeviceTopologyAnnotation:    "gpu.example.com/clique",
				lockv1.CapacityTypesAnnotation:     "on-demand, spot",
			},
			wantRequired: []string{"topology.kubernetes.io/zone"},
			wantAnnotation: map[string]string{
				lockv1.PreferredTopologyAnnotation: "example.com/rack,example.com/block",
				lockv1.DeviceTopologyAnnotation:    "gpu.example.com/clique",
				lockv1.CapacityTypesAnnotation:     "on-demand,spot",
			},
		},
		"preemption terms": {
			ann: map[string]string{
				lockv1.MinRuntimeAnnotation:       "30m",
				lockv1.PreemptionNoticeAnnotation: " 10m ",
				lockv1.CheckpointedAtAnnotation:   "2026-12-03T10:00:00Z", // the job's own: not the group's
			},
			wantAnnotation: map[string]string{
				lockv1.MinRuntimeAnnotation:       "30m",
				lockv1.PreemptionNoticeAnnotation: "10m",
			},
		},
		"a Job's activeDeadlineSeconds is its gang's maximum runtime": {
			ann:            map[string]string{lockv1.PreemptionDelayAnnotation: "5m"},
			activeDeadline: 5400,
			wantAnnotation: map[string]string{lockv1.PreemptionDelayAnnotation: "5m", lockv1.MaxRuntimeAnnotation: "1h30m0s"},
		},
		"a declared maximum runtime wins over activeDeadlineSeconds": {
			ann:            map[string]string{lockv1.MaxRuntimeAnnotation: "1h"},
			activeDeadline: 5400,
			wantAnnotation: map[string]string{lockv1.MaxRuntimeAnnotation: "1h"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			job := gangJob()
			job.Annotations = tc.ann
			if tc.activeDeadline > 0 {
				job.Spec.ActiveDeadlineSeconds = &tc.activeDeadline
			}
			r, _ := newReconciler(job)
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "train"}}); err != nil {
				t.Fatal(err)
			}
			pg := &lockv1.PodGroup{}
			if err := r.Client.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "train"}, pg); err != nil {
				t.Fatal(err)
			}
			var required []string
			if c := pg.Spec.SchedulingConstraints; c != nil {
				for _, k := range c.Topology {
					required = append(required, k.Key)
				}
			}
			if diff := cmp.Diff(tc.wantRequired, required); diff != "" {
				t.Errorf("required (-want,+got):\n%s", diff)
			}
			got := map[string]string{}
			for k, v := range pg.Annotations {
				if strings.HasPrefix(k, "scheduling.lockstep.dev/") {
					got[k] = v
				}
			}
			if len(tc.wantAnnotation) == 0 {
				tc.wantAnnotation = map[string]string{}
			}
			if diff := cmp.Diff(tc.wantAnnotation, got); diff != "" {
				t.Errorf("annotations (-want,+got):\n%s", diff)
			}
		})
	}
}

// A RayCluster whose worker groups may run below their size is a tree: a
// root CompositePodGroup controlled by the cluster that needs every child,
// the head's gang of 1 and each worker group with its minimum (a basic
// group for minReplicas 0), and a Workload of one composite template —
// so no worker can stand in for the head (issue 25).
func TestReconcileTree(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName}}
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ray", UID: "ray-uid"},
		Spec: rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: tmpl}, WorkerGroupSpecs: []rayv1.WorkerGroupSpec{
			{GroupName: "gpu", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](0), Template: tmpl},
			{GroupName: "cpu", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](1), Template: tmpl},
		}},
	}
	all := integrations.All()
	integ := all.ForKind("ray.io/v1", "RayCluster")
	r := &jobintegration.Reconciler{Recorder: &recorder{}, Integration: integ, Integrations: all}
	r.Client = fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(rc).
		WithIndex(&rayv1.RayCluster{}, jobintegration.IndexWanted, r.Wanted).Build()
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "ray"}}); err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "ray", UID: "ray-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	root := &lockv1.CompositePodGroup{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "ray"}, root); err != nil {
		t.Fatalf("root CompositePodGroup: %v", err)
	}
	wantRoot := lockv1.CompositePodGroupSpec{
		WorkloadRef:      &lockv1.WorkloadReference{WorkloadName: "ray", TemplateName: jobintegration.RootTemplateName},
		SchedulingPolicy: lockv1.CompositePodGroupSchedulingPolicy{Gang: &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 3}},
		DisruptionMode:   &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}},
	}
	if diff := cmp.Diff(wantRoot, root.Spec); diff != "" {
		t.Errorf("root spec (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(owner, root.OwnerReferences); diff != "" {
		t.Errorf("root owner (-want,+got):\n%s", diff)
	}
	type child struct {
		Parent, Template string
		Gang             *lockv1.GangSchedulingPolicy
		Basic            bool
	}
	want := map[string]child{
		"ray-head": {Parent: "ray", Template: "head", Gang: &lockv1.GangSchedulingPolicy{MinCount: 1}},
		"ray-gpu":  {Parent: "ray", Template: "gpu", Basic: true},
		"ray-cpu":  {Parent: "ray", Template: "cpu", Gang: &lockv1.GangSchedulingPolicy{MinCount: 1}},
	}
	pgs := &lockv1.PodGroupList{}
	if err := r.Client.List(ctx, pgs); err != nil {
		t.Fatal(err)
	}
	got := map[string]child{}
	for _, pg := range pgs.Items {
		got[pg.Name] = child{Parent: ptr.Deref(pg.Spec.ParentCompositePodGroupName, ""), Template: pg.Spec.WorkloadRef.TemplateName,
			Gang: pg.Spec.SchedulingPolicy.Gang, Basic: pg.Spec.SchedulingPolicy.Basic != nil}
		if diff := cmp.Diff(owner, pg.OwnerReferences); diff != "" {
			t.Errorf("PodGroup %s owner (-want,+got):\n%s", pg.Name, diff)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("children (-want,+got):\n%s", diff)
	}
	wl := &lockv1.Workload{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "ray"}, wl); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range wl.Spec.CompositePodGroupTemplates {
		for _, p := range c.PodGroupTemplates {
			names = append(names, c.Name+"/"+p.Name)
		}
	}
	if diff := cmp.Diff([]string{"job/head", "job/gpu", "job/cpu"}, names); diff != "" || len(wl.Spec.PodGroupTemplates) != 0 {
		t.Errorf("Workload templates (-want,+got):\n%s; flat templates %d, want none", diff, len(wl.Spec.PodGroupTemplates))
	}
	rec := r.Recorder.(*recorder)
	wantEvents := []string{"Job ray: Normal GangCreated: created CompositePodGroup ray (gang of all 3 groups), PodGroup ray-head (gang, minCount 1), PodGroup ray-gpu (basic: no minimum), PodGroup ray-cpu (gang, minCount 1) and Workload ray"}
	if diff := cmp.Diff(wantEvents, rec.events); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

// Without CompositePodGroups served (an upgrade left their CRD out), a job
// whose roles make a tree gets no partial gang — no Workload, no child
// PodGroups hanging under a parent that cannot exist — but a warning event
// naming the fix.
func TestReconcileTreeWithoutComposites(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName}}
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ray", UID: "ray-uid"},
		Spec: rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: tmpl}, WorkerGroupSpecs: []rayv1.WorkerGroupSpec{
			{GroupName: "gpu", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](0), Template: tmpl},
		}},
	}
	all := integrations.All()
	r := &jobintegration.Reconciler{Recorder: &recorder{}, Integration: all.ForKind("ray.io/v1", "RayCluster"), Integrations: all, WithoutComposites: true}
	r.Client = fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(rc).
		WithIndex(&rayv1.RayCluster{}, jobintegration.IndexWanted, r.Wanted).Build()
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "ray"}}); err != nil {
		t.Fatal(err)
	}
	groups, workloads := &lockv1.PodGroupList{}, &lockv1.WorkloadList{}
	if err := r.Client.List(ctx, groups); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.List(ctx, workloads); err != nil {
		t.Fatal(err)
	}
	if len(groups.Items)+len(workloads.Items) != 0 {
		t.Errorf("created %d PodGroups and %d Workloads for a tree whose root cannot exist, want none", len(groups.Items), len(workloads.Items))
	}
	events := r.Recorder.(*recorder).events
	if len(events) != 1 || !strings.Contains(events[0], "Warning CompositePodGroupNotServed: the RayCluster's roles make a scheduling tree, but the API server does not serve CompositePodGroups") {
		t.Errorf("events %q, want one CompositePodGroupNotServed warning", events)
	}
}
