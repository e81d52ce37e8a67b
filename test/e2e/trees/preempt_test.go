package trees

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// A high-priority gang that needs one rack, on a full cluster where only a
// low-priority tree (root disruptionMode all) can make room, evicts the
// tree whole — both children, though one rack would do — and never a
// child alone: both children's incarnations end with the preemption, and
// the gang binds in a rack the tree held.
func TestPreemptionEvictsAVictimTreeWhole(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "trees-low"}, Value: 10},
		{ObjectMeta: metav1.ObjectMeta{Name: "trees-urgent"}, Value: 1000},
	} {
		if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	low := func(p *corev1.Pod) { p.Spec.PriorityClassName = "trees-low" }
	urgent := func(p *corev1.Pod) { p.Spec.PriorityClassName = "trees-urgent" }

	// The tree takes a zone (a rack per child); urgent pods take the other.
	createComposite(ctx, t, h, composite(ns, "job", "", 2, zone, false))
	for _, g := range []string{"w0", "w1"} {
		h.CreatePodGroup(ctx, t, child(ns, g, "job", 4))
		members(t, ctx, h, ns, g, 4, low)
	}
	for _, g := range []string{"w0", "w1"} {
		h.WaitRunning(t, ctx, ns, g, 4)
		waitIncarnation(t, ctx, h, ns, g, 1, 4, "")
	}
	treeZone := one(t, "the tree's zone", onNodes(t, ctx, h, ns, "w0", zone))
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "fill", 8))
	members(t, ctx, h, ns, "fill", 8, urgent)
	h.WaitRunning(t, ctx, ns, "fill", 8)

	gang := builders.GangPodGroup(ns, "gang", 4)
	gang.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: rack}}}
	h.CreatePodGroup(ctx, t, gang)
	members(t, ctx, h, ns, "gang", 4, urgent)

	for _, g := range []string{"w0", "w1"} {
		waitIncarnation(t, ctx, h, ns, g, 1, 4, lockv1.PodGroupReasonPreemption)
		waitGone(t, ctx, h, ns, g)
	}
	waitBound(t, ctx, h, ns, "gang", 4)
	if z := one(t, "gang's zone", onNodes(t, ctx, h, ns, "gang", zone)); z != treeZone {
		t.Errorf("the gang landed in %s; only the tree's zone %s had room to make", z, treeZone)
	}
	h.NoLifecycleRestart(t, ctx, ns, "fill")
}
