package trees

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// running starts a tree of two children of 3 GPUs and waits for both to
// run with their incarnations recorded.
func running(t *testing.T, ctx context.Context, h *harness.Harness, ns string, single bool) {
	t.Helper()
	h.OneGPUTemplate(ctx, t, ns)
	tree(t, ctx, h, ns, 3, single)
	for _, g := range []string{"w0", "w1"} {
		h.WaitRunning(t, ctx, ns, g, 3)
		waitIncarnation(t, ctx, h, ns, g, 1, 3, "")
	}
}

// waitIncarnation waits for a group's incarnation number n of size
// members, ended with reason ("" for running).
func waitIncarnation(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, n int32, size int, reason string) harness.GroupState {
	t.Helper()
	var st harness.GroupState
	harness.Eventually(t, ctx, fmt.Sprintf("%s's incarnation %d ended %q", group, n, reason), func(ctx context.Context) (bool, string, error) {
		var err error
		st, err = h.State(ctx, ns, group)
		if err != nil {
			return false, "", err
		}
		inc := st.Incarnation
		if inc == nil || inc.Number != n || len(inc.Members) != size {
			return false, st.String(), nil
		}
		got := ""
		if inc.Ended != nil {
			got = inc.Ended.Reason
		}
		return got == reason, st.String(), nil
	})
	return st
}

// waitGone waits for a group to have no pods left.
func waitGone(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string) {
	t.Helper()
	harness.Eventually(t, ctx, "every pod of "+group+" gone", func(ctx context.Context) (bool, string, error) {
		pods, _, err := h.GroupPods(ctx, ns, group)
		return len(pods) == 0, fmt.Sprintf("%d pods", len(pods)), err
	})
}

func deletePod(ctx context.Context, t *testing.T, h *harness.Harness, ns, name string) {
	t.Helper()
	if err := h.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Under a root with disruptionMode all (Lockstep's nil), a member deleted
// from w0 ends both children's incarnations and evicts w1's members with
// the tree's reason; recreated (as a controller would), the tree is placed
// whole again, each child in a rack of one zone, incarnation 2.
func TestMemberLossRestartsTheWholeTree(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	running(t, ctx, h, ns, false)

	deletePod(ctx, t, h, ns, "w0-0")
	waitIncarnation(t, ctx, h, ns, "w0", 1, 3, integrity.ReasonMemberLost)
	st := waitIncarnation(t, ctx, h, ns, "w1", 1, 3, integrity.ReasonTreeMemberLost)
	if want := "PodGroup w0 lost a member (pod w0-0 was deleted) and CompositePodGroup job restarts its tree whole"; !strings.Contains(st.Incarnation.Ended.Message, want) {
		t.Errorf("w1's incarnation ended with %q, want it to say %q", st.Incarnation.Ended.Message, want)
	}
	harness.Eventually(t, ctx, "w1's restart event", func(ctx context.Context) (bool, string, error) {
		st, err := h.State(ctx, ns, "w1")
		return len(st.Restarts) == 1, st.String(), err
	})
	waitGone(t, ctx, h, ns, "w0")
	waitGone(t, ctx, h, ns, "w1")

	for _, g := range []string{"w0", "w1"} {
		members(t, ctx, h, ns, g, 3, nil)
	}
	for _, g := range []string{"w0", "w1"} {
		h.WaitRunning(t, ctx, ns, g, 3)
		waitIncarnation(t, ctx, h, ns, g, 2, 3, "")
		one(t, g+"'s rack", onNodes(t, ctx, h, ns, g, rack))
	}
	z0 := one(t, "w0's zone", onNodes(t, ctx, h, ns, "w0", zone))
	if z1 := one(t, "w1's zone", onNodes(t, ctx, h, ns, "w1", zone)); z0 != z1 {
		t.Errorf("the restarted tree spans zones %s and %s", z0, z1)
	}
}

// A child PodGroup deleted from a running tree whose root is a gang of
// minGroupCount 2 leaves the tree below its minimum: the other child's
// incarnation ends with the tree (TreeMemberLost, saying which composite
// is short) and its members are evicted — the tree restarts whole, as a
// gang below minCount does, instead of running on short.
func TestDeletedChildRestartsTheTree(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	running(t, ctx, h, ns, false)

	if err := h.Dynamic.Resource(podgroup.Resource).Namespace(ns).Delete(ctx, "w0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitIncarnation(t, ctx, h, ns, "w1", 1, 3, integrity.ReasonTreeMemberLost)
	if want := "CompositePodGroup job has 1 of minGroupCount 2 groups"; !strings.Contains(st.Incarnation.Ended.Message, want) {
		t.Errorf("w1's incarnation ended with %q, want it to say %q", st.Incarnation.Ended.Message, want)
	}
	waitGone(t, ctx, h, ns, "w1")
}

// Under a root with disruptionMode single, a member deleted from w0
// restarts w0 alone: w1 keeps running in its first incarnation, never
// marked for disruption; w0, recreated, runs again in the tree's zone.
func TestSingleRootRestartsOnlyTheAffectedChild(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	running(t, ctx, h, ns, true)
	before, err := h.RunningPods(ctx, ns, "w1")
	if err != nil {
		t.Fatal(err)
	}
	z1 := one(t, "w1's zone", onNodes(t, ctx, h, ns, "w1", zone))

	deletePod(ctx, t, h, ns, "w0-0")
	waitIncarnation(t, ctx, h, ns, "w0", 1, 3, integrity.ReasonMemberLost)
	waitGone(t, ctx, h, ns, "w0")
	members(t, ctx, h, ns, "w0", 3, nil)
	h.WaitRunning(t, ctx, ns, "w0", 3)
	waitIncarnation(t, ctx, h, ns, "w0", 2, 3, "")
	if z0 := one(t, "w0's zone", onNodes(t, ctx, h, ns, "w0", zone)); z0 != z1 {
		t.Errorf("w0 restarted in %s, outside its tree's zone %s", z0, z1)
	}

	waitIncarnation(t, ctx, h, ns, "w1", 1, 3, "")
	h.NoLifecycleRestart(t, ctx, ns, "w1")
	after, err := h.RunningPods(ctx, ns, "w1")
	if err != nil {
		t.Fatal(err)
	}
	for uid := range before {
		if _, ok := after[uid]; !ok {
			t.Errorf("w1's pod %s stopped running while only w0 restarted", uid)
		}
	}
}

// Nothing wrong, nothing restarted: in a running tree (root all), w1's
// members finishing and then w0's group deleted by its owner (the
// PodGroup, then its pods) leave the rest running in their first
// incarnation; a flat gang beside the tree that loses a member restarts
// itself alone, as it always has.
func TestRunningTreeIsNotRestartedWhenNothingIsWrong(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	createComposite(ctx, t, h, composite(ns, "job", "", 2, zone, false))
	h.CreatePodGroup(ctx, t, child(ns, "w0", "job", 3))
	h.CreatePodGroup(ctx, t, child(ns, "w1", "job", 3))
	h.CreatePodGroup(ctx, t, child(ns, "w2", "job", 1))
	members(t, ctx, h, ns, "w0", 3, nil)
	members(t, ctx, h, ns, "w1", 3, func(p *corev1.Pod) {
		p.Annotations = map[string]string{"sim.lockstep.dev/succeed-after": "2s"}
	})
	members(t, ctx, h, ns, "w2", 1, nil)
	h.WaitRunning(t, ctx, ns, "w0", 3)
	waitIncarnation(t, ctx, h, ns, "w0", 1, 3, "")

	harness.Eventually(t, ctx, "w1 completed", func(ctx context.Context) (bool, string, error) {
		st, err := h.State(ctx, ns, "w1")
		return st.RunningReason() == lockv1.RunningReasonCompleted, st.String(), err
	})

	// Its owner deletes w2: the group first, then its pod.
	if err := h.Dynamic.Resource(podgroup.Resource).Namespace(ns).Delete(ctx, "w2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletePod(ctx, t, h, ns, "w2-0")
	waitGone(t, ctx, h, ns, "w2")

	// A flat gang beside the tree loses a member: it restarts, alone.
	flat := builders.GangPodGroup(ns, "flat", 2)
	flat.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: rack}}}
	h.CreatePodGroup(ctx, t, flat)
	members(t, ctx, h, ns, "flat", 2, nil)
	h.WaitRunning(t, ctx, ns, "flat", 2)
	one(t, "flat's rack", onNodes(t, ctx, h, ns, "flat", rack))
	deletePod(ctx, t, h, ns, "flat-0")
	harness.Eventually(t, ctx, "flat restarted", func(ctx context.Context) (bool, string, error) {
		st, err := h.State(ctx, ns, "flat")
		return st.RunningReason() == lockv1.RunningReasonFailed && len(st.Restarts) == 1, st.String(), err
	})
	waitGone(t, ctx, h, ns, "flat")

	waitIncarnation(t, ctx, h, ns, "w0", 1, 3, "")
	h.NoLifecycleRestart(t, ctx, ns, "w0")
	h.WaitRunning(t, ctx, ns, "w0", 3)
}
