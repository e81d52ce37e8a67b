package integrity

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

func member(name string, mod func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{lockv1.PodGroupLabel: "train"}},
		Spec:       corev1.PodSpec{SchedulerName: lockv1.SchedulerName, NodeName: "n1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if mod != nil {
		mod(&p)
	}
	return p
}

func failed(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }

func markedAndDeleted(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: PodReason}}
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
}

func newReconciler() *Reconciler {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	return &Reconciler{
		Client: fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(node).Build(),
		lost:   map[types.NamespacedName]string{},
		ended:  map[types.UID]bool{},
	}
}

var gang4 = &lockv1.PodGroup{
	ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"},
	Spec:       lockv1.PodGroupSpec{SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: 4}}},
}

// The replacement gang is bound while members of the restarted one are still
// listed (Job finalizers, per-index backoff): they are no loss of the new gang.
func TestReplacementGangIsNotRestartedForTheOldMembers(t *testing.T) {
	r := newReconciler()
	pods := []corev1.Pod{
		member("old-0", func(p *corev1.Pod) { failed(p); markedAndDeleted(p) }), // evicted by the restart
		member("old-1", func(p *corev1.Pod) { markedAndDeleted(p) }),            // evicted, not yet stopped
		member("old-2", failed), // the failure that caused the restart
		member("new-0", nil), member("new-1", nil), member("new-2", nil), member("new-3", nil),
	}
	r.endIncarnation("old-2")
	g := r.inspect(context.Background(), gang4, pods)
	if g.reason != "" || len(g.bound) != 4 {
		t.Fatalf("want the new gang of 4 left alone, got reason %q (%s), %d bound", g.reason, g.detail, len(g.bound))
	}
}

func TestFailedMemberOfTheRunningGangRestartsIt(t *testing.T) {
	r := newReconciler()
	pods := []corev1.Pod{member("a", failed), member("b", nil), member("c", nil), member("d", nil)}
	g := r.inspect(context.Background(), gang4, pods)
	if g.reason != ReasonMemberFailed || len(g.bound) != 3 || len(g.gone) != 1 || g.gone[0] != "a" {
		t.Fatalf("want MemberFailed evicting 3, with a gone; got %q, %d bound, gone %v", g.reason, len(g.bound), g.gone)
	}
}

// A member marked for a restart but not deleted (the delete failed) is still
// a member: it must be evicted by the retry, not skipped.
func TestMarkedButRunningMemberIsStillEvicted(t *testing.T) {
	r := newReconciler()
	marked := member("a", func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: PodReason}}
	})
	pods := []corev1.Pod{marked, member("b", func(p *corev1.Pod) { failed(p); markedAndDeleted(p) })}
	r.endIncarnation("b")
	g := r.inspect(context.Background(), gang4, pods)
	if g.reason == "" || len(g.bound) != 1 || g.bound[0].Name != "a" {
		t.Fatalf("want the marked running member evicted, got reason %q, bound %d", g.reason, len(g.bound))
	}
}

func TestDeletedOldMemberIsNoNewLoss(t *testing.T) {
	r := newReconciler()
	old := member("old", nil)
	r.endIncarnation(old.UID)
	r.memberDeleted(&old)
	if len(r.lost) != 0 || r.ended[old.UID] {
		t.Fatalf("deleting a member of a restarted incarnation: lost %v, still remembered %v", r.lost, r.ended[old.UID])
	}
	cur := member("cur", nil)
	r.memberDeleted(&cur)
	if len(r.lost) != 1 {
		t.Fatalf("deleting a running member of the current gang must be remembered as a loss, got %v", r.lost)
	}
}
