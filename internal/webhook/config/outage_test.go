package config

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

const (
	jobController = "system:serviceaccount:kube-system:job-controller"
	kueueManager  = "system:serviceaccount:kueue-system:kueue-controller-manager"
	gcController  = "system:serviceaccount:kube-system:generic-garbage-collector"
	alice         = "alice"
)

func validatingHook(t *testing.T, name string) admissionv1.ValidatingWebhook {
	t.Helper()
	_, v := Configurations(Endpoint{URL: "https://127.0.0.1:9443"}, JobControllerUsers)
	for _, w := range v.Webhooks {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no validating webhook %s", name)
	return admissionv1.ValidatingWebhook{}
}

// rank is a Job's pod in group, as the Job controller creates it.
func rank(name, group string, job *batchv1.Job) *corev1.Pod {
	p := builders.MakePod().Namespace("team-a").Name(name).Member(group).Obj()
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
	return p
}

func edited[T client.Object](o T, edit func(T)) T {
	c := o.DeepCopyObject().(T)
	edit(c)
	return c
}

// TestPodUpdatesReachValidationOnlyToChangeTheGroup: with kube-apiserver's
// CEL code, pods.validate is called for a pod's creation by a user and for
// an update that changes its group (label or spec.schedulingGroup) — what
// it judges, and what fails closed while it is down — but not for the
// updates the Job controller and others make on members: removing the
// Job's tracking finalizer, annotations, other labels.
func TestPodUpdatesReachValidationOnlyToChangeTheGroup(t *testing.T) {
	w := validatingHook(t, "pods.validate.scheduling.lockstep.dev")
	job := builders.IndexedJob("team-a", "train", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	job.UID = "job-uid"
	member := rank("train-0", "train", job)
	member.Finalizers = []string{batchv1.JobTrackingFinalizer}
	member.Spec.NodeName = "worker-0"
	lone := builders.MakePod().Namespace("team-a").Name("lone").Scheduler(lockv1.SchedulerName).Obj()
	other := builders.MakePod().Namespace("team-a").Name("web").Label("app", "web").Obj()
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	update := func(user string, old, obj *corev1.Pod) request {
		return request{op: admission.Update, old: old, obj: obj, gvk: podGVK, resource: "pods", username: user}
	}
	for name, tc := range map[string]struct {
		req  request
		want bool
	}{
		"a user creates a member":                      {req: request{op: admission.Create, obj: builders.MakePod().Namespace("team-a").Name("p").Member("g").Obj(), gvk: podGVK, resource: "pods", username: alice}, want: true},
		"the Job controller creates a rank":            {req: request{op: admission.Create, obj: member, gvk: podGVK, resource: "pods", username: jobController}},
		"the Job controller removes its finalizer":     {req: update(jobController, member, edited(member, func(p *corev1.Pod) { p.Finalizers = nil }))},
		"a member annotated":                           {req: update(alice, member, edited(member, func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "x"} }))},
		"a member's other label changed":               {req: update(alice, member, edited(member, func(p *corev1.Pod) { p.Labels["team"] = "x" }))},
		"a member moved to another group":              {req: update(alice, member, edited(member, func(p *corev1.Pod) { p.Labels[lockv1.PodGroupLabel] = "other" })), want: true},
		"a member's label removed":                     {req: update(alice, member, edited(member, func(p *corev1.Pod) { delete(p.Labels, lockv1.PodGroupLabel) })), want: true},
		"a member's label emptied":                     {req: update(alice, member, edited(member, func(p *corev1.Pod) { p.Labels[lockv1.PodGroupLabel] = "" })), want: true},
		"a lone Lockstep pod put in a group":           {req: update(alice, lone, edited(lone, func(p *corev1.Pod) { p.Labels = map[string]string{lockv1.PodGroupLabel: "g"} })), want: true},
		"a lone Lockstep pod annotated":                {req: update(alice, lone, edited(lone, func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "x"} }))},
		"another scheduler's pod put in a group":       {req: update(alice, other, edited(other, func(p *corev1.Pod) { p.Labels[lockv1.PodGroupLabel] = "g" })), want: true},
		"another scheduler's pod relabelled otherwise": {req: update(alice, other, edited(other, func(p *corev1.Pod) { p.Labels["app"] = "api" }))},
		"a member named by schedulingGroup moved": {req: update(alice, lone, edited(lone, func(p *corev1.Pod) {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("g")}
		})), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := webhookMatches(t, w, tc.req); got != tc.want {
				t.Errorf("webhook called: want %v, got %v", tc.want, got)
			}
		})
	}
}

// TestJobUpdatesReachValidationOnlyWhenJudged: jobs.validate is called for
// a Lockstep Job's creation and for updates that change what it judges
// (Lockstep annotations, parallelism, the template's group, priority or
// containers), not for what the Job controller, Kueue and the garbage
// collector do to a Job: resuming it with the scheduling directives Kueue
// writes, finalizers, other labels.
func TestJobUpdatesReachValidationOnlyWhenJudged(t *testing.T) {
	w := validatingHook(t, "jobs.validate.scheduling.lockstep.dev")
	held := builders.IndexedJob("team-a", "train", 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Member("train").Req(corev1.ResourceCPU, "1").Obj())
	held.Spec.Suspend = ptr.To(true)
	held.Annotations = map[string]string{"kueue.x-k8s.io/queue-name": "user-queue"}
	plain := builders.IndexedJob("team-a", "web", 2, builders.MakePod().Scheduler(corev1.DefaultSchedulerName).Obj()) // as defaulted
	jobGVK := batchv1.SchemeGroupVersion.WithKind("Job")
	update := func(user string, old, obj *batchv1.Job) request {
		return request{op: admission.Update, old: old, obj: obj, gvk: jobGVK, resource: "jobs", username: user}
	}
	kueueStarts := func(j *batchv1.Job) {
		j.Spec.Suspend = ptr.To(false)
		j.Spec.Template.Spec.NodeSelector = map[string]string{"cloud.example.com/flavor": "gpu"}
		j.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		j.Spec.Template.Labels["kueue.x-k8s.io/podset"] = "main"
		j.Spec.Template.Annotations = map[string]string{"kueue.x-k8s.io/workload": "job-train-1234"}
	}
	for name, tc := range map[string]struct {
		req  request
		want bool
	}{
		"a user creates a Lockstep Job":              {req: request{op: admission.Create, obj: held, gvk: jobGVK, resource: "jobs", username: alice}, want: true},
		"a user creates a Job for another scheduler": {req: request{op: admission.Create, obj: plain, gvk: jobGVK, resource: "jobs", username: alice}},
		"a user creates a Job for another scheduler whose template names a group": {req: request{op: admission.Create, obj: edited(plain, func(j *batchv1.Job) {
			j.Spec.Template.Labels = map[string]string{lockv1.PodGroupLabel: "train"}
		}), gvk: jobGVK, resource: "jobs", username: alice}, want: true},
		"a user resumes it":                 {req: update(alice, held, edited(held, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }))},
		"Kueue admits it":                   {req: update(kueueManager, held, edited(held, kueueStarts))},
		"Kueue suspends it again":           {req: update(kueueManager, edited(held, kueueStarts), held)},
		"the garbage collector's finalizer": {req: update(gcController, held, edited(held, func(j *batchv1.Job) { j.Finalizers = []string{metav1.FinalizerDeleteDependents} }))},
		"a label added":                     {req: update(alice, held, edited(held, func(j *batchv1.Job) { j.Labels = map[string]string{"team": "a"} }))},
		"another annotation changed":        {req: update(alice, held, edited(held, func(j *batchv1.Job) { j.Annotations["kueue.x-k8s.io/queue-name"] = "other" }))},
		"the min-count annotation added":    {req: update(alice, held, edited(held, func(j *batchv1.Job) { j.Annotations["scheduling.lockstep.dev/min-count"] = "2" })), want: true},
		"the disruption mode changed":       {req: update(alice, edited(held, func(j *batchv1.Job) { j.Annotations["scheduling.lockstep.dev/disruption-mode"] = "all" }), edited(held, func(j *batchv1.Job) { j.Annotations["scheduling.lockstep.dev/disruption-mode"] = "single" })), want: true},
		"the min-count annotation removed":  {req: update(alice, edited(held, func(j *batchv1.Job) { j.Annotations["scheduling.lockstep.dev/min-count"] = "2" }), held), want: true},
		"parallelism changed":               {req: update(alice, held, edited(held, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](2) })), want: true},
		"the template's group changed":      {req: update(alice, held, edited(held, func(j *batchv1.Job) { j.Spec.Template.Labels[lockv1.PodGroupLabel] = "someone-else" })), want: true},
		"the template's group removed":      {req: update(alice, held, edited(held, func(j *batchv1.Job) { delete(j.Spec.Template.Labels, lockv1.PodGroupLabel) })), want: true},
		"the template's priority changed":   {req: update(alice, held, edited(held, func(j *batchv1.Job) { j.Spec.Template.Spec.PriorityClassName = "high" })), want: true},
		"the template's requests changed":   {req: update(alice, held, edited(held, func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "evil" })), want: true},
		"Kueue admits it and the group moves": {req: update(kueueManager, held, edited(held, func(j *batchv1.Job) {
			kueueStarts(j)
			j.Spec.Template.Labels[lockv1.PodGroupLabel] = "someone-else"
		})), want: true},
		"a Job for another scheduler resumed": {req: update(alice, plain, edited(plain, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }))},
	} {
		t.Run(name, func(t *testing.T) {
			if got := webhookMatches(t, w, tc.req); got != tc.want {
				t.Errorf("webhook called: want %v, got %v", tc.want, got)
			}
		})
	}
}

// TestPodGroupUpdatesReachValidationOnlyWhenJudged: podgroups.validate is
// called for creations and for changes of a group's spec or owners, not
// for labels, annotations or finalizers (the API server passes a custom
// resource to CEL as unstructured).
func TestPodGroupUpdatesReachValidationOnlyWhenJudged(t *testing.T) {
	w := validatingHook(t, "podgroups.validate.scheduling.lockstep.dev")
	base := builders.GangPodGroup("team-a", "g", 2)
	pgGVK := lockv1.GroupVersion.WithKind("PodGroup")
	u := func(pg *lockv1.PodGroup) client.Object {
		out, err := podgroup.ToUnstructured(pg)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	update := func(obj *lockv1.PodGroup) request {
		return request{op: admission.Update, old: u(base), obj: u(obj), gvk: pgGVK, resource: "podgroups", username: alice}
	}
	for name, tc := range map[string]struct {
		req  request
		want bool
	}{
		"created":                {req: request{op: admission.Create, obj: u(base), gvk: pgGVK, resource: "podgroups", username: alice}, want: true},
		"minCount changed":       {req: update(edited(base, func(pg *lockv1.PodGroup) { pg.Spec.SchedulingPolicy.Gang.MinCount = 3 })), want: true},
		"preemptionPolicy added": {req: update(edited(base, func(pg *lockv1.PodGroup) { pg.Spec.PreemptionPolicy = ptr.To(lockv1.PreemptLowerPriority) })), want: true},
		"an owner added": {req: update(edited(base, func(pg *lockv1.PodGroup) {
			pg.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "u"}}
		})), want: true},
		"a finalizer added": {req: update(edited(base, func(pg *lockv1.PodGroup) { pg.Finalizers = []string{"example.com/keep"} }))},
		"a label added":     {req: update(edited(base, func(pg *lockv1.PodGroup) { pg.Labels = map[string]string{"team": "a"} }))},
		"its status in the object": {req: update(edited(base, func(pg *lockv1.PodGroup) {
			pg.Status.Conditions = []metav1.Condition{{Type: "Running", Status: metav1.ConditionTrue, Reason: "Running"}}
		}))},
	} {
		t.Run(name, func(t *testing.T) {
			if got := webhookMatches(t, w, tc.req); got != tc.want {
				t.Errorf("webhook called: want %v, got %v", tc.want, got)
			}
		})
	}
}
