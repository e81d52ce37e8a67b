package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kueuegroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// kueuePod is a Lockstep pod Kueue's pod integration groups: plain, unless
// it is given owners or labels.
func kueuePod(group, total string) *builders.PodWrapper {
	w := builders.MakePod().Namespace("team-a").Name("p").Scheduler(lockv1.SchedulerName).Label(kueuegroup.GroupNameLabel, group)
	if total != "" {
		w.Annotation(kueuegroup.TotalCountAnnotation, total)
	}
	return w
}

func withOperation(op admissionv1.Operation) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "team-a"}})
}

// A pod in a Kueue pod group joins the Lockstep PodGroup of that name: at
// creation, or — unbound — when Kueue labels it later (a StatefulSet's
// pods); a pod of a gang job joins its job's group whatever Kueue says, and
// a pod whose Kueue metadata cannot be read is left for the validation.
func TestPodDefaulterJoinsKueueGroups(t *testing.T) {
	gangJob := builders.IndexedJob("team-a", "train", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	gangJob.UID = "job-uid"
	for name, tc := range map[string]struct {
		objs []client.Object
		op   admissionv1.Operation
		pod  *corev1.Pod
		want string
	}{
		"a plain pod at creation":          {op: admissionv1.Create, pod: kueuePod("infer", "4").Obj(), want: "infer"},
		"a StatefulSet's pod Kueue labels": {op: admissionv1.Update, pod: kueuePod("sts-web-3f2a1", "3").Obj(), want: "sts-web-3f2a1"},
		"a bound pod is not moved":         {op: admissionv1.Update, pod: kueuePod("infer", "4").Node("worker-1").Obj()},
		"another scheduler's pod":          {op: admissionv1.Create, pod: kueuePod("infer", "4").Scheduler("default-scheduler").Obj()},
		"no total count":                   {op: admissionv1.Create, pod: kueuePod("infer", "").Obj()},
		"a pod already in a group":         {op: admissionv1.Update, pod: kueuePod("infer", "4").Member("mine").Obj(), want: "mine"},
		"a pod of a gang Job joins the Job's gang": {
			objs: []client.Object{gangJob}, op: admissionv1.Create, pod: ownedBy(kueuePod("infer", "4").Obj(), gangJob), want: "train",
		},
		"a pod of a gang Job is never moved into a Kueue group": {
			objs: []client.Object{gangJob}, op: admissionv1.Update, pod: ownedBy(kueuePod("infer", "4").Obj(), gangJob),
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := &PodDefaulter{reads: validator(tc.objs...).reads}
			if err := d.Default(withOperation(tc.op), tc.pod); err != nil {
				t.Fatal(err)
			}
			if got := tc.pod.Labels[lockv1.PodGroupLabel]; got != tc.want {
				t.Errorf("group %q, want %q", got, tc.want)
			}
		})
	}
}

// Kueue metadata Lockstep cannot read is refused, never silently placed
// alone; joining a Kueue group after creation passes the checks creation
// would; a pod cannot otherwise change groups.
func TestPodValidatorKueueGroups(t *testing.T) {
	jobGroup := builders.GangPodGroup("team-a", "train", 2)
	jobGroup.OwnerReferences = ownedBy(builders.MakePod().Obj(), builders.IndexedJob("team-a", "train", 2, builders.MakePod().Obj())).OwnerReferences
	jobGroup.OwnerReferences[0].UID = "job-uid"
	first := kueuePod("infer", "2").Member("infer").Obj()
	first.Name, first.UID, first.Spec.Priority = "first", "first", ptr.To[int32](100)
	t.Run("create", func(t *testing.T) {
		for name, tc := range map[string]struct {
			pod     *corev1.Pod
			wantErr string
		}{
			"a readable group":        {pod: kueuePod("infer", "4").Member("infer").Obj()},
			"no total count":          {pod: kueuePod("infer", "").Obj(), wantErr: "kueue.x-k8s.io/pod-group-total-count]: Required value"},
			"a bad name":              {pod: kueuePod("Infer_A", "4").Obj(), wantErr: "a lowercase RFC 1123 subdomain"},
			"another scheduler's pod": {pod: kueuePod("infer", "").Scheduler("default-scheduler").Obj()},
			"in another group (an integration's), Kueue's metadata is not Lockstep's": {pod: kueuePod("infer", "").Member("lws-0").Obj()},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := validator().ValidateCreate(withOperation(admissionv1.Create), tc.pod)
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Errorf("got %v, want %q", err, tc.wantErr)
				}
			})
		}
	})
	t.Run("update", func(t *testing.T) {
		unlabelled := builders.MakePod().Namespace("team-a").Name("p").Scheduler(lockv1.SchedulerName).Obj()
		joined := kueuePod("infer", "2").Member("infer").Obj()
		for name, tc := range map[string]struct {
			objs     []client.Object
			old, new *corev1.Pod
			wantErr  string
		}{
			"joins the group Kueue labels it with": {old: unlabelled, new: joined},
			"joins with the members' priority":     {objs: []client.Object{first}, old: unlabelled, new: func() *corev1.Pod { p := joined.DeepCopy(); p.Spec.Priority = ptr.To[int32](100); return p }()},
			"not with another priority":            {objs: []client.Object{first}, old: unlabelled, new: joined, wantErr: "differs from the priority 100 of PodGroup infer's other members"},
			"not once bound": {old: unlabelled.DeepCopy(), new: func() *corev1.Pod { p := joined.DeepCopy(); p.Spec.NodeName = "worker-1"; return p }(),
				wantErr: "fixed when it is created"},
			"not into a group Kueue does not name": {old: unlabelled, new: kueuePod("infer", "2").Member("other").Obj(), wantErr: "fixed when it is created"},
			"not into a Job's gang":                {objs: []client.Object{jobGroup}, old: unlabelled, new: kueuePod("train", "2").Member("train").Obj(), wantErr: "PodGroup train is the gang of Job train"},
			"not with unreadable metadata":         {old: unlabelled, new: kueuePod("infer", "x").Member("infer").Obj(), wantErr: "not a positive integer"},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := validator(tc.objs...).ValidateUpdate(withOperation(admissionv1.Update), tc.old, tc.new)
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Errorf("got %v, want %q", err, tc.wantErr)
				}
			})
		}
	})
}
