package gang

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// gpuMembers creates n pods of a group, each with its own claim for one GPU
// from the template "one-gpu" (created once per namespace by oneGPUTemplate).
func gpuMembers(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, n int, cpu string) {
	t.Helper()
	for i := 0; i < n; i++ {
		pod := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i)).Member(group).
			Req(corev1.ResourceCPU, cpu).ClaimTemplate("gpu", "one-gpu").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func oneGPUTemplate(t *testing.T, ctx context.Context, h *harness.Harness, ns string) {
	t.Helper()
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// allocatedToUnbound lists claims in ns that hold devices while reserved for
// (or owned by) a pod that is not bound — what must never happen.
func allocatedToUnbound(ctx context.Context, h *harness.Harness, ns string) ([]string, error) {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	bound := map[string]bool{}
	for _, p := range pods.Items {
		bound[string(p.UID)] = p.Spec.NodeName != ""
	}
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if !bound[string(r.UID)] {
				bad = append(bad, c.Name+" (reserved for unbound "+r.Name+")")
			}
		}
		for _, o := range c.OwnerReferences {
			if o.Kind == "Pod" && !bound[string(o.UID)] {
				bad = append(bad, c.Name+" (owned by unbound "+o.Name+")")
			}
		}
	}
	return bad, nil
}

// waitBound waits until the group has want bound pods.
func waitBound(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, want int) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("group %s with %d bound pods", group, want), func(ctx context.Context) (bool, string, error) {
		_, bound, err := h.GroupPods(ctx, ns, group)
		return bound == want, fmt.Sprintf("%d bound", bound), err
	})
}

// waitCondition waits for the group's PodGroupInitiallyScheduled condition.
func waitCondition(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	harness.Eventually(t, ctx, fmt.Sprintf("group %s condition %s/%s", group, status, reason), func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, group)
		if err != nil || c == nil {
			return false, "no condition", err
		}
		got = c
		return c.Status == status && c.Reason == reason, fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message), nil
	})
	return got
}
