package jobintegration_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A gang whose job's controller cannot create its pods because a
// ResourceQuota has no room says so on its PodGroup — the quota, the
// resource, the numbers and the fix — and on the job; a gang that has its
// pods, or that no quota stands in the way of, is never written to; the
// condition goes once the quota has room (issue 28, finding 9).
func TestQuotaReconciler(t *testing.T) {
	gpuPod := func() *builders.PodWrapper {
		return builders.MakePod().Scheduler(lockv1.SchedulerName).Req("example.com/gpu", "1")
	}
	job := func(edit func(*batchv1.Job)) *batchv1.Job {
		j := builders.IndexedJob("ml", "train", 4, gpuPod().Obj())
		j.UID = "train-uid"
		if edit != nil {
			edit(j)
		}
		return j
	}
	group := func() *builders.PodGroupWrapper {
		return builders.MakePodGroup().Namespace("ml").Name("train").MinCount(4).ControlledBy("batch/v1", "Job", "train", "train-uid")
	}
	rank := func(i string) *corev1.Pod {
		p := gpuPod().Namespace("ml").Name("train-"+i).Member("train").Annotation(lockv1.GangOfAnnotation, "Job.batch/train").
			Label("batch.kubernetes.io/job-completion-index", i).Obj()
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "train-uid", Controller: ptr.To(true)}}
		return p
	}
	gpuQuota := func(hard string) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "gpu"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.example.com/gpu": resource.MustParse(hard)}}}
	}
	blockedMsg := "2 of minCount 4 pods do not exist: Job train's pods cannot be created, ResourceQuota gpu has no room for another (requests.example.com/gpu: 2 used of 2, a pod requests 1); raise the quota's spec.hard[requests.example.com/gpu] to at least 4, or end pods it counts, and the gang is created and placed whole"
	type want struct {
		Condition string // "reason: message", "" for none
		Written   bool
		Events    []string
	}
	for name, tc := range map[string]struct {
		objs []client.Object
		pg   *lockv1.PodGroup
		want want
	}{
		"two ranks made, no GPU quota left": {
			objs: []client.Object{job(nil), rank("0"), rank("1"), gpuQuota("2")}, pg: group().Obj(),
			want: want{Condition: "QuotaExceeded: " + blockedMsg, Written: true, Events: []string{
				"PodGroup train: Warning QuotaExceeded: " + blockedMsg, "Job train: Warning QuotaExceeded: " + blockedMsg}},
		},
		"no rank made: the template says what they request": {
			objs: []client.Object{job(nil), gpuQuota("0")}, pg: group().Obj(),
			want: want{Condition: "QuotaExceeded: 4 of minCount 4 pods do not exist: Job train's pods cannot be created, ResourceQuota gpu has no room for another (requests.example.com/gpu: 0 used of 0, a pod requests 1); raise the quota's spec.hard[requests.example.com/gpu] to at least 4, or end pods it counts, and the gang is created and placed whole",
				Written: true, Events: []string{
					"PodGroup train: Warning QuotaExceeded: 4 of minCount 4 pods do not exist: Job train's pods cannot be created, ResourceQuota gpu has no room for another (requests.example.com/gpu: 0 used of 0, a pod requests 1); raise the quota's spec.hard[requests.example.com/gpu] to at least 4, or end pods it counts, and the gang is created and placed whole",
					"Job train: Warning QuotaExceeded: 4 of minCount 4 pods do not exist: Job train's pods cannot be created, ResourceQuota gpu has no room for another (requests.example.com/gpu: 0 used of 0, a pod requests 1); raise the quota's spec.hard[requests.example.com/gpu] to at least 4, or end pods it counts, and the gang is created and placed whole",
				}},
		},
		"the quota has room (ranks on their way): nothing written": {
			objs: []client.Object{job(nil), rank("0"), rank("1"), gpuQuota("8")}, pg: group().Obj(),
		},
		"no quota: nothing written": {
			objs: []client.Object{job(nil), rank("0"), rank("1")}, pg: group().Obj(),
		},
		"every rank exists: nothing written, even with a full quota": {
			objs: []client.Object{job(nil), rank("0"), rank("1"), rank("2"), rank("3"), gpuQuota("4")}, pg: group().Obj(),
		},
		"a suspended Job has no pods by design": {
			objs: []client.Object{job(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }), gpuQuota("0")}, pg: group().Obj(),
		},
		"a group no job controls is not judged": {
			objs: []client.Object{gpuQuota("0")}, pg: builders.MakePodGroup().Namespace("ml").Name("train").MinCount(4).Obj(),
		},
		"already said: not written again": {
			objs: []client.Object{job(nil), rank("0"), rank("1"), gpuQuota("2")},
			pg:   group().Condition(lockv1.PodCreationBlocked, metav1.ConditionTrue, lockv1.PodCreationReasonQuotaExceeded, blockedMsg).Obj(),
			want: want{Condition: "QuotaExceeded: " + blockedMsg},
		},
		"the quota was raised: the condition goes": {
			objs: []client.Object{job(nil), rank("0"), rank("1"), gpuQuota("4")},
			pg:   group().Condition(lockv1.PodCreationBlocked, metav1.ConditionTrue, lockv1.PodCreationReasonQuotaExceeded, blockedMsg).Obj(),
			want: want{Written: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(append(tc.objs, tc.pg)...).
				WithStatusSubresource(&lockv1.PodGroup{}).Build()
			rec := &recorder{}
			r := &jobintegration.QuotaReconciler{Client: c, Recorder: rec, Integrations: integrations.All(), Clock: clocktesting.NewFakeClock(time.Unix(0, 0))}
			before := &lockv1.PodGroup{}
			key := types.NamespacedName{Namespace: "ml", Name: "train"}
			if err := c.Get(context.Background(), key, before); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			after := &lockv1.PodGroup{}
			if err := c.Get(context.Background(), key, after); err != nil {
				t.Fatal(err)
			}
			got := want{Written: after.ResourceVersion != before.ResourceVersion, Events: rec.events}
			if cond := meta.FindStatusCondition(after.Status.Conditions, lockv1.PodCreationBlocked); cond != nil {
				got.Condition = cond.Reason + ": " + cond.Message
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

// A quota change (raised, or room freed: its status counts the pods) looks
// again at the gangs of its namespace that may wait for pods or say they
// are blocked — not at running gangs, nor at groups no job controls.
func TestQuotaChangeLooksAtWaitingGangs(t *testing.T) {
	objs := []client.Object{
		builders.MakePodGroup().Namespace("ml").Name("waiting").MinCount(2).ControlledBy("batch/v1", "Job", "waiting", "w").Obj(),
		builders.MakePodGroup().Namespace("ml").Name("running").MinCount(2).ControlledBy("batch/v1", "Job", "running", "r").
			Condition(lockv1.Running, metav1.ConditionTrue, lockv1.RunningReasonRunning, "").Obj(),
		builders.MakePodGroup().Namespace("ml").Name("blocked").MinCount(2).ControlledBy("batch/v1", "Job", "blocked", "b").
			Condition(lockv1.Running, metav1.ConditionTrue, lockv1.RunningReasonRunning, "").
			Condition(lockv1.PodCreationBlocked, metav1.ConditionTrue, lockv1.PodCreationReasonQuotaExceeded, "").Obj(),
		builders.MakePodGroup().Namespace("ml").Name("users").MinCount(2).Obj(),
		builders.MakePodGroup().Namespace("other").Name("elsewhere").MinCount(2).ControlledBy("batch/v1", "Job", "elsewhere", "e").Obj(),
	}
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(objs...).Build()
	r := &jobintegration.QuotaReconciler{Client: c, Integrations: integrations.All()}
	var got []string
	for _, req := range r.GroupsOfQuota(context.Background(), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "q"}}) {
		got = append(got, req.Name)
	}
	if d := cmp.Diff([]string{"blocked", "waiting"}, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
