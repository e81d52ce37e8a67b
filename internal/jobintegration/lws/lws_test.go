package lws

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

func serving(replicas, size int32) *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serve", UID: "lws-uid"},
		Spec: lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To(replicas), StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To(size),
				WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName}}}},
	}
}

func TestGroups(t *testing.T) {
	got, err := jobintegration.Groups(Integration{}.Wrap(serving(2, 4)))
	if err != nil {
		t.Fatal(err)
	}
	want := []jobintegration.Group{
		{Name: "serve-0", Template: "group", MinCount: 4, Size: 4, Roles: []string{"leader", "worker"}},
		{Name: "serve-1", Template: "group", MinCount: 4, Size: 4, Roles: []string{"leader", "worker"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want,+got):\n%s", diff)
	}
	l := serving(1, 4)
	l.Spec.StartupPolicy = lwsv1.LeaderReadyStartupPolicy
	if _, err := jobintegration.Groups(Integration{}.Wrap(l)); err == nil {
		t.Error("startupPolicy LeaderReady: want not a gang (workers wait for the leader to run)")
	}
}

func ownedBy(o metav1.Object, kind, name string, uid types.UID) {
	apiVersion := "apps/v1"
	switch kind {
	case "Pod":
		apiVersion = "v1"
	case "LeaderWorkerSet":
		apiVersion = lwsv1.GroupVersion.String()
	}
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}})
}

// A leader belongs to the LeaderWorkerSet through its StatefulSet, a worker
// through its group's StatefulSet and its leader; a leader not labelled
// with its group index yet joins the group of its StatefulSet ordinal.
func TestOwnerAndGroupOfPods(t *testing.T) {
	l := serving(2, 3)
	leaderSTS := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serve", UID: "sts-uid"}}
	ownedBy(leaderSTS, "LeaderWorkerSet", "serve", "lws-uid")
	leader := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serve-1", UID: "leader-uid",
		Labels: map[string]string{lwsv1.SetNameLabelKey: "serve", lwsv1.WorkerIndexLabelKey: "0"}}}
	ownedBy(leader, "StatefulSet", "serve", "sts-uid")
	groupSTS := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serve-1", UID: "group-sts-uid"}}
	ownedBy(groupSTS, "Pod", "serve-1", "leader-uid")
	worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serve-1-2", UID: "worker-uid",
		Labels: map[string]string{lwsv1.SetNameLabelKey: "serve", lwsv1.GroupIndexLabelKey: "1", lwsv1.WorkerIndexLabelKey: "2"}}}
	ownedBy(worker, "StatefulSet", "serve-1", "group-sts-uid")
	stray := worker.DeepCopy()
	ownedBy(stray, "StatefulSet", "elsewhere", "other")
	scheme := podgroup.Scheme()
	if err := (Integration{}).AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(l, leaderSTS, leader, groupSTS).Build()
	j := Integration{}.Wrap(l).(*LWS)
	for name, tc := range map[string]struct {
		pod       *corev1.Pod
		owner     string
		group     string
		groupRole string
	}{
		"a leader, before its group index label": {pod: leader, owner: "serve", group: "serve-1", groupRole: "leader"},
		"a worker":                               {pod: worker, owner: "serve", group: "serve-1", groupRole: "worker"},
		"a pod of another StatefulSet":           {pod: stray, owner: ""},
	} {
		t.Run(name, func(t *testing.T) {
			owner, _, err := Integration{}.OwnerOf(context.Background(), getter{c}, tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if owner != tc.owner {
				t.Fatalf("owner %q, want %q", owner, tc.owner)
			}
			if owner == "" {
				return
			}
			if g := j.GroupOfPod(tc.pod); g != tc.group {
				t.Errorf("group %q, want %q", g, tc.group)
			}
			if r := j.RoleOf(tc.pod); r != tc.groupRole {
				t.Errorf("role %q, want %q", r, tc.groupRole)
			}
		})
	}
}

type getter struct{ c client.Client }

func (g getter) Get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	return g.c.Get(ctx, key, obj)
}

// A scale-down's groups lose their PodGroups once none of their pods is
// left unfinished (until then the reconciler looks again); the groups that
// stay, and other owners' PodGroups, are kept.
func TestReconcilePrunesGroupsAScaleDownRemoved(t *testing.T) {
	scheme := podgroup.Scheme()
	if err := (Integration{}).AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	l := serving(1, 2)
	group := func(name, ownerUID string) *lockv1.PodGroup {
		pg := &lockv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: lockv1.PodGroupSpec{SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: 2}}}}
		ownedBy(pg, "LeaderWorkerSet", "serve", types.UID(ownerUID))
		return pg
	}
	member := func(name, g string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: map[string]string{lockv1.PodGroupLabel: g}}, Status: corev1.PodStatus{Phase: phase}}
	}
	for name, tc := range map[string]struct {
		pods      []client.Object
		wantGone  bool
		wantAgain bool
	}{
		"a removed group with a running pod is kept, and looked at again": {pods: []client.Object{member("serve-1", "serve-1", corev1.PodRunning)}, wantAgain: true},
		"a removed group whose pods finished goes":                        {pods: []client.Object{member("serve-1", "serve-1", corev1.PodSucceeded)}, wantGone: true},
		"a removed group with no pod left goes":                           {wantGone: true},
	} {
		t.Run(name, func(t *testing.T) {
			objs := append([]client.Object{l, group("serve-0", "lws-uid"), group("serve-1", "lws-uid"), group("serve-9", "another-lws")}, tc.pods...)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
			r := &jobintegration.Reconciler{Client: c, Recorder: record.NewFakeRecorder(10), Integration: Integration{}, Integrations: jobintegration.Set{Integration{}}}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "serve"}})
			if err != nil {
				t.Fatal(err)
			}
			exists := func(name string) bool {
				return c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: name}, &lockv1.PodGroup{}) == nil
			}
			if gone := !exists("serve-1"); gone != tc.wantGone {
				t.Errorf("serve-1 deleted %v, want %v", gone, tc.wantGone)
			}
			if !exists("serve-0") || !exists("serve-9") {
				t.Error("a group that stays, or another LeaderWorkerSet's, was deleted")
			}
			if again := res.RequeueAfter > 0; again != tc.wantAgain {
				t.Errorf("requeue after %v, want again %v", res.RequeueAfter, tc.wantAgain)
			}
		})
	}
}
