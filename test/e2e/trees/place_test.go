package trees

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// A 2-level tree — the job in one zone, each worker group in one rack — is
// placed whole: each child in a rack of its own (3 GPUs each, 4 per rack),
// both racks in one zone, and the root says so.
func TestTreePlacedWholeInOneZone(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	tree(t, ctx, h, ns, 3, false)
	waitBound(t, ctx, h, ns, "w0", 3)
	waitBound(t, ctx, h, ns, "w1", 3)

	r0 := one(t, "w0's rack", onNodes(t, ctx, h, ns, "w0", rack))
	r1 := one(t, "w1's rack", onNodes(t, ctx, h, ns, "w1", rack))
	if r0 == r1 {
		t.Errorf("w0 and w1 share rack %s, which has 4 GPUs for their 6", r0)
	}
	z0 := one(t, "w0's zone", onNodes(t, ctx, h, ns, "w0", zone))
	if z1 := one(t, "w1's zone", onNodes(t, ctx, h, ns, "w1", zone)); z0 != z1 {
		t.Errorf("the tree spans zones %s (w0) and %s (w1); its root requires one zone", z0, z1)
	}
	waitComposite(t, ctx, h, ns, "job", metav1.ConditionTrue)
}

// A tree that fits nowhere — each zone has one GPU taken, the tree needs a
// whole zone (two racks of 4) — holds nothing, though w0 alone would fit in
// a free rack; once a zone is freed it binds whole there.
func TestTreeThatFitsNowhereHoldsNothingUntilRoomAppears(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	block(t, ctx, h, ns, "block-a", "rack-0")
	block(t, ctx, h, ns, "block-b", "rack-2")
	tree(t, ctx, h, ns, 4, false)

	waitComposite(t, ctx, h, ns, "job", metav1.ConditionFalse)
	holdsNothing(t, ctx, h, ns, "block-a", "block-b")

	if err := h.Client.CoreV1().Pods(ns).Delete(ctx, "block-a-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, h, ns, "w0", 4)
	waitBound(t, ctx, h, ns, "w1", 4)
	for _, g := range []string{"w0", "w1"} {
		if z := one(t, g+"'s zone", onNodes(t, ctx, h, ns, g, zone)); z != "zone-0" {
			t.Errorf("%s landed in %s; only zone-0 was freed", g, z)
		}
	}
	waitComposite(t, ctx, h, ns, "job", metav1.ConditionTrue)
}

// Deleting a pending tree's root leaves its children waiting with reason
// WaitingForParent: once room appears they are still not scheduled flat
// (a flat group created after them is); created again, the root's tree
// binds whole.
func TestChildrenOfADeletedParentWait(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	block(t, ctx, h, ns, "block-a", "rack-0")
	block(t, ctx, h, ns, "block-b", "rack-2")
	tree(t, ctx, h, ns, 4, false)
	waitComposite(t, ctx, h, ns, "job", metav1.ConditionFalse)

	deleteComposite(ctx, t, h, ns, "job")
	waitGroupCondition(t, ctx, h, ns, "w0", lockv1.CompositeReasonWaitingForParent)
	waitGroupCondition(t, ctx, h, ns, "w1", lockv1.CompositeReasonWaitingForParent)
	for _, p := range []string{"block-a-0", "block-b-0"} {
		if err := h.Client.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A flat group queued after the children is placed: the scheduler has
	// seen the room the children would fit in alone.
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "probe", 1))
	members(t, ctx, h, ns, "probe", 1, nil)
	waitBound(t, ctx, h, ns, "probe", 1)
	holdsNothing(t, ctx, h, ns, "probe", "block-a", "block-b")
	waitGroupCondition(t, ctx, h, ns, "w0", lockv1.CompositeReasonWaitingForParent)

	createComposite(ctx, t, h, composite(ns, "job", "", 2, zone, false))
	waitBound(t, ctx, h, ns, "w0", 4)
	waitBound(t, ctx, h, ns, "w1", 4)
	one(t, "w0's rack", onNodes(t, ctx, h, ns, "w0", rack))
	one(t, "w1's rack", onNodes(t, ctx, h, ns, "w1", rack))
	z0 := one(t, "w0's zone", onNodes(t, ctx, h, ns, "w0", zone))
	if z1 := one(t, "w1's zone", onNodes(t, ctx, h, ns, "w1", zone)); z0 != z1 {
		t.Errorf("the tree spans zones %s and %s", z0, z1)
	}
}

// block takes one GPU of a rack with a flat group of one pod.
func block(t *testing.T, ctx context.Context, h *harness.Harness, ns, name, inRack string) {
	t.Helper()
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, name, 1))
	members(t, ctx, h, ns, name, 1, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{rack: inRack} })
	waitBound(t, ctx, h, ns, name, 1)
}

// waitComposite waits for the CompositePodGroupInitiallyScheduled
// condition of a CompositePodGroup to have status.
func waitComposite(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, status metav1.ConditionStatus) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("CompositePodGroup %s scheduled %s", name, status), func(ctx context.Context) (bool, string, error) {
		c, err := compositeCondition(ctx, h, ns, name)
		if err != nil || c == nil {
			return false, "no condition", err
		}
		return c.Status == status, fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message), nil
	})
}
