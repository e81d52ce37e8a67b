package kueuegroup

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

func newReconciler(objs ...client.Object) (*Reconciler, *record.FakeRecorder) {
	c := fake.NewClientBuilder().WithScheme(podgroup.Scheme()).WithObjects(objs...).WithIndex(&corev1.Pod{}, indexGroup, indexValue).Build()
	rec := record.NewFakeRecorder(10)
	return &Reconciler{Client: c, Reader: c, Recorder: rec}, rec
}

func reconcileGroup(t *testing.T, r *Reconciler, name string) *lockv1.PodGroup {
	t.Helper()
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}}); err != nil {
		t.Fatal(err)
	}
	pg := &lockv1.PodGroup{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: name}, pg); err != nil {
		return nil
	}
	return pg
}

// The group's first member brings its PodGroup: a gang of the total count,
// owned by its members; later members own it too, and a new count (a
// resized group) becomes its minCount.
func TestReconcileCreatesAndFollowsTheGroup(t *testing.T) {
	a, b := member("a", "train", "3", 1).Obj(), member("b", "train", "3", 2).Obj()
	r, rec := newReconciler(a, b)
	pg := reconcileGroup(t, r, "train")
	if pg == nil || pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 3 || len(pg.OwnerReferences) != 2 || pg.Spec.DisruptionMode.All == nil {
		t.Fatalf("want a gang of minCount 3, mode all, owned by both pods; got %+v", pg)
	}
	if e := <-rec.Events; !strings.Contains(e, "GangCreated") || !strings.Contains(e, "minCount 3") {
		t.Errorf("event %q", e)
	}
	c := member("c", "train", "4", 3).Obj()
	if err := r.Client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	pg = reconcileGroup(t, r, "train")
	if pg.Spec.SchedulingPolicy.Gang.MinCount != 4 || len(pg.OwnerReferences) != 3 {
		t.Errorf("want minCount 4 and 3 owners after a member of count 4 came; got %d, %d", pg.Spec.SchedulingPolicy.Gang.MinCount, len(pg.OwnerReferences))
	}
	rv := pg.ResourceVersion
	if pg = reconcileGroup(t, r, "train"); pg.ResourceVersion != rv {
		t.Error("nothing changed, yet the PodGroup was written")
	}
}

// A PodGroup of the group's name that Lockstep did not make for it (the
// user's own) is used as it is: never changed, never owned by the pods —
// and not silently: an event on it says so.
func TestReconcileLeavesOthersPodGroups(t *testing.T) {
	own := builders.GangPodGroup("team-a", "train", 2)
	r, rec := newReconciler(own, member("a", "train", "5", 1).Obj())
	pg := reconcileGroup(t, r, "train")
	if pg.Spec.SchedulingPolicy.Gang.MinCount != 2 || len(pg.OwnerReferences) != 0 || Ours(pg) {
		t.Errorf("the user's PodGroup was changed: %+v", pg)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Normal NotMadeForKueueGroup the pods of Kueue pod group train join this PodGroup as it is") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event says the user's PodGroup is used as it is")
	}
}

// No member, no PodGroup: pods that merely carry Kueue's label (another
// scheduler's) make none.
func TestReconcileNeedsAMember(t *testing.T) {
	r, _ := newReconciler(builders.MakePod().Namespace("team-a").Name("x").Label(GroupNameLabel, "train").Annotation(TotalCountAnnotation, "2").Obj())
	if pg := reconcileGroup(t, r, "train"); pg != nil {
		t.Errorf("made %+v for pods Lockstep does not schedule", pg)
	}
}

// A StatefulSet that creates its pods one at a time can never have them
// all waiting: its group is placed pod by pod, with a warning saying why;
// a Parallel one is a gang.
func TestReconcileOrderedReadyStatefulSetIsNoGang(t *testing.T) {
	for policy, gang := range map[appsv1.PodManagementPolicyType]bool{appsv1.OrderedReadyPodManagement: false, appsv1.ParallelPodManagement: true} {
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serve", UID: "sts-uid"}, Spec: appsv1.StatefulSetSpec{PodManagementPolicy: policy}}
		pod := member("serve-0", "serve", "3", 1).Annotation(ServingAnnotation, "true").Obj()
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "serve", UID: "sts-uid", Controller: ptr.To(true)}}
		r, rec := newReconciler(sts, pod)
		pg := reconcileGroup(t, r, "serve")
		if got := pg.Spec.SchedulingPolicy.Gang != nil; got != gang {
			t.Errorf("%s: gang %v, want %v", policy, got, gang)
		}
		e := <-rec.Events
		if want := map[bool]string{true: "GangCreated", false: "podManagementPolicy OrderedReady"}[gang]; !strings.Contains(e, want) {
			t.Errorf("%s: event %q does not say %q", policy, e, want)
		}
	}
}
