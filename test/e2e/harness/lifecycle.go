package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// GroupState is what a test checks of a group's lifecycle.
type GroupState struct {
	// Running is the Running condition (nil when not written yet).
	Running *metav1.Condition
	// Incarnation is the current incarnation (nil before the first).
	Incarnation *lockv1.PodGroupIncarnation
	// Restarts are the GangRestart events of the group.
	Restarts []string
}

// State reads a group's Running condition, incarnation and restart events.
func (h *Harness) State(ctx context.Context, ns, name string) (GroupState, error) {
	pg, err := h.PodGroup(ctx, ns, name)
	if err != nil {
		return GroupState{}, err
	}
	st := GroupState{Running: meta.FindStatusCondition(pg.Status.Conditions, lockv1.Running), Incarnation: pg.Status.Incarnation}
	evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=GangRestart"})
	if err != nil {
		return st, err
	}
	for _, e := range evs.Items {
		st.Restarts = append(st.Restarts, e.Message)
	}
	return st, nil
}

// RunningReason is the Running condition's reason, or "".
func (st GroupState) RunningReason() string {
	if st.Running == nil {
		return ""
	}
	return st.Running.Reason
}

// String is a one-line summary for failure messages.
func (st GroupState) String() string {
	inc := "none"
	if i := st.Incarnation; i != nil {
		inc = fmt.Sprintf("%d (%d members", i.Number, len(i.Members))
		if i.Ended != nil {
			inc += ", ended " + i.Ended.Reason + ": " + i.Ended.Message
		}
		inc += ")"
	}
	run := "none"
	if st.Running != nil {
		run = fmt.Sprintf("%s/%s: %s", st.Running.Status, st.Running.Reason, st.Running.Message)
	}
	return fmt.Sprintf("Running %s; incarnation %s; %d restarts %q", run, inc, len(st.Restarts), st.Restarts)
}

// RunningPods maps the UID of every bound, running, not-terminating pod of a
// group to its node.
func (h *Harness) RunningPods(ctx context.Context, ns, group string) (map[types.UID]string, error) {
	pods, _, err := h.GroupPods(ctx, ns, group)
	if err != nil {
		return nil, err
	}
	out := map[types.UID]string{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodRunning && podgroup.Active(p) && !podgroup.Going(p) {
			out[p.UID] = p.Spec.NodeName
		}
	}
	return out, nil
}

// WaitRunning waits until exactly n pods of the group run (phase Running,
// not terminating), and returns them with their nodes.
func (h *Harness) WaitRunning(t testing.TB, ctx context.Context, ns, group string, n int) map[types.UID]string {
	t.Helper()
	var running map[types.UID]string
	Eventually(t, ctx, fmt.Sprintf("%d pods of %s running", n, group), func(ctx context.Context) (bool, string, error) {
		var err error
		running, err = h.RunningPods(ctx, ns, group)
		return len(running) == n, fmt.Sprintf("%d running", len(running)), err
	})
	return running
}

// NoLifecycleRestart fails the test when the group was restarted or its
// pods were evicted by Lockstep.
func (h *Harness) NoLifecycleRestart(t testing.TB, ctx context.Context, ns, group string) {
	t.Helper()
	st, err := h.State(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Restarts) > 0 {
		t.Errorf("PodGroup %s was restarted: %s", group, st)
	}
	pods, _, err := h.GroupPods(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		if c := podgroup.Disruption(&pods[i]); c != nil {
			t.Errorf("pod %s was marked for disruption: %s: %s", pods[i].Name, c.Reason, c.Message)
		}
	}
}

// RestartOnUnhealthyDevice reports, as its kubelet would, the GPU of one
// running member of group Unhealthy and waits until the gang runs again
// whole on n new members (none of those that ran before) as its next
// incarnation; it returns how long that took from the report.
func (h *Harness) RestartOnUnhealthyDevice(t testing.TB, ctx context.Context, ns, group string, n int) time.Duration {
	t.Helper()
	before := h.WaitRunning(t, ctx, ns, group, n)
	pods, _, err := h.GroupPods(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	var sick types.UID
	for _, p := range pods {
		if claim, _ := heldClaim(&p); claim != "" && before[p.UID] != "" {
			sick = p.UID
		}
	}
	if sick == "" {
		t.Fatalf("no running member of %s holds a claim", group)
	}
	st, err := h.State(ctx, ns, group)
	if err != nil || st.Incarnation == nil {
		t.Fatalf("group %s has no incarnation yet: %v", group, err)
	}
	was := st.Incarnation.Number
	h.ReportDeviceHealth(t, ctx, ns, sick, corev1.ResourceHealthStatusUnhealthy)
	reported := time.Now()
	Eventually(t, ctx, fmt.Sprintf("the gang %s running again whole on new members", group), func(ctx context.Context) (bool, string, error) {
		now, err := h.RunningPods(ctx, ns, group)
		if err != nil {
			return false, "", err
		}
		for uid := range now {
			if _, old := before[uid]; old {
				return false, "a member that ran before still runs", nil
			}
		}
		return len(now) == n, fmt.Sprintf("%d new members running", len(now)), nil
	})
	took := time.Since(reported)
	if st, err := h.State(ctx, ns, group); err != nil || st.Incarnation == nil || st.Incarnation.Number != was+1 {
		t.Errorf("want the gang %s running as incarnation %d, got %s (%v)", group, was+1, st, err)
	}
	return took
}
