package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestGangBindsWhatFitsOnceMinCountIs: a gang of 4 one-GPU ranks with
// minCount 2, on the 3 GPUs another gang leaves free. The gang is admitted
// (3 ≥ minCount): 3 ranks bind, the 4th stays pending with its own
// Unschedulable condition holding no device, and joins the running gang
// when a GPU is freed — as upstream's "minCount is scheduled, but one pod
// remains unschedulable" expects (issue 23: nothing bound).
func TestGangBindsWhatFitsOnceMinCountIs(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "hold", 3))
	gpuMembers(t, ctx, h, ns, "hold", 3, "1")
	waitBound(t, ctx, h, ns, "hold", 3)

	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "elastic", 2))
	gpuMembers(t, ctx, h, ns, "elastic", 4, "1")
	waitBound(t, ctx, h, ns, "elastic", 3)
	// The members are created one by one, so the first placement may see
	// only 3 of them ("3 of 3"); the group's counts then take the 4th in.
	harness.Eventually(t, ctx, "group condition counting 3 of 4", func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, "elastic")
		if err != nil || c == nil {
			return false, "no condition", err
		}
		want := "3 of 4 pods placed (minCount 2)"
		return c.Status == metav1.ConditionTrue && c.Reason == lockv1.PodGroupReasonScheduled && c.Message == want, fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message), nil
	})
	var pending string
	harness.Eventually(t, ctx, "the rank that did not fit says why", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=elastic"})
		if err != nil {
			return false, "", err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName != "" {
				continue
			}
			pending = p.Name
			pc := podgroup.PodCondition(p, corev1.PodScheduled)
			if pc == nil {
				return false, p.Name + ": no condition", nil
			}
			ok := pc.Status == corev1.ConditionFalse && pc.Reason == corev1.PodReasonUnschedulable && strings.Contains(pc.Message, "gpu.example.com")
			return ok, fmt.Sprintf("%s: %s/%s: %s", p.Name, pc.Status, pc.Reason, pc.Message), nil
		}
		return false, "no pending rank", nil
	})
	time.Sleep(2 * time.Second) // later cycles bind nothing more and allocate nothing to it
	if _, bound, _ := h.GroupPods(ctx, ns, "elastic"); bound != 3 {
		t.Errorf("elastic: %d bound with 3 GPUs free, want 3", bound)
	}
	if bad, err := allocatedToUnbound(ctx, h, ns); err != nil || len(bad) > 0 {
		t.Errorf("devices allocated to unbound pods: %v (err %v)", bad, err)
	}

	// The other gang finishes: the pending rank joins the running gang,
	// which is not restarted (its 3 bound ranks keep their nodes).
	before := boundNodes(t, ctx, h, ns, "elastic")
	if err := h.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=hold"}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, h, ns, "elastic", 4)
	after := boundNodes(t, ctx, h, ns, "elastic")
	for name, node := range before {
		if after[name] != node {
			t.Errorf("rank %s moved from %q to %q: the running gang was restarted", name, node, after[name])
		}
	}
	if after[pending] == "" {
		t.Errorf("the pending rank %s did not join the gang: %v", pending, after)
	}
}

// boundNodes maps each bound pod of a group (by name, with its UID, so a
// pod recreated under the same name counts as moved) to its node.
func boundNodes(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string) map[string]string {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			out[p.Name] = string(p.UID) + "@" + p.Spec.NodeName
		}
	}
	return out
}
