package trees

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// composite is a gang CompositePodGroup of minGroupCount children required
// in one domain of key ("" for none); single sets disruptionMode single
// (nil, Lockstep's all, otherwise).
func composite(ns, name, parent string, minGroupCount int32, key string, single bool) *lockv1.CompositePodGroup {
	c := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.APIVersion = lockv1.GroupVersion.String()
	c.Spec.SchedulingPolicy.Gang = &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}
	if parent != "" {
		c.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	if key != "" {
		c.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: key}}}
	}
	if single {
		c.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	}
	return c
}

func createComposite(ctx context.Context, t *testing.T, h *harness.Harness, c *lockv1.CompositePodGroup) {
	t.Helper()
	u, err := podgroup.CompositeToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(c.Namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CompositePodGroup %s: %v", c.Name, err)
	}
}

func deleteComposite(ctx context.Context, t *testing.T, h *harness.Harness, ns, name string) {
	t.Helper()
	if err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting CompositePodGroup %s: %v", name, err)
	}
}

// compositeCondition is the CompositePodGroupInitiallyScheduled condition
// of a CompositePodGroup (nil if none yet).
func compositeCondition(ctx context.Context, h *harness.Harness, ns, name string) (*metav1.Condition, error) {
	u, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	c, err := podgroup.CompositeFromUnstructured(u)
	if err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(c.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled), nil
}

// child is a gang PodGroup under parent, required in one rack.
func child(ns, name, parent string, minCount int32) *lockv1.PodGroup {
	pg := builders.GangPodGroup(ns, name, minCount)
	pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: rack}}}
	return pg
}

// members creates n bare member pods of group, one GPU each; tweak, if
// set, changes each before it is created.
func members(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, n int, tweak func(*corev1.Pod)) {
	t.Helper()
	for i := range n {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i)).Member(group).ClaimTemplate("gpu", "one-gpu").Obj()
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		if tweak != nil {
			tweak(p)
		}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// tree creates a root CompositePodGroup "job" (gang of 2, one zone) with
// two children w0 and w1, each a gang of n GPUs in one rack, and their
// pods.
func tree(t *testing.T, ctx context.Context, h *harness.Harness, ns string, n int32, single bool) {
	t.Helper()
	createComposite(ctx, t, h, composite(ns, "job", "", 2, zone, single))
	for _, g := range []string{"w0", "w1"} {
		h.CreatePodGroup(ctx, t, child(ns, g, "job", n))
		members(t, ctx, h, ns, g, int(n), nil)
	}
}

// onNodes is the value of key on the node of every bound pod of group.
func onNodes(t *testing.T, ctx context.Context, h *harness.Harness, ns, group, key string) map[string]string {
	t.Helper()
	pods, _, err := h.GroupPods(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		n, err := h.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = n.Labels[key]
	}
	return out
}

// one checks that every pod of m is in the same domain and returns it.
func one(t *testing.T, what string, m map[string]string) string {
	t.Helper()
	v := ""
	for pod, val := range m {
		if v != "" && val != v {
			t.Errorf("%s: pods in several domains: %v (%s)", what, m, pod)
		}
		v = val
	}
	return v
}

func waitBound(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, want int) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("group %s with %d bound pods", group, want), func(ctx context.Context) (bool, string, error) {
		_, bound, err := h.GroupPods(ctx, ns, group)
		return bound == want, fmt.Sprintf("%d bound", bound), err
	})
}

// waitGroupCondition waits for a PodGroup's PodGroupInitiallyScheduled
// condition to be False with reason.
func waitGroupCondition(t *testing.T, ctx context.Context, h *harness.Harness, ns, group, reason string) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("group %s condition False/%s", group, reason), func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, group)
		if err != nil || c == nil {
			return false, "no condition", err
		}
		return c.Status == metav1.ConditionFalse && c.Reason == reason, fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message), nil
	})
}

// holdsNothing fails the test if any pod of ns is bound or any claim of ns
// is allocated, except those of the groups named in except.
func holdsNothing(t *testing.T, ctx context.Context, h *harness.Harness, ns string, except ...string) {
	t.Helper()
	skip := map[string]bool{}
	for _, g := range except {
		skip[g] = true
	}
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]bool{}
	for _, p := range pods.Items {
		if skip[podgroup.GroupOf(&p)] {
			owners[p.Name] = true
			continue
		}
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of group %s is bound to %s while its tree is not admitted", p.Name, podgroup.GroupOf(&p), p.Spec.NodeName)
		}
	}
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		owned := false
		for _, r := range c.OwnerReferences {
			owned = owned || owners[r.Name]
		}
		if !owned && c.Status.Allocation != nil {
			t.Errorf("claim %s is allocated while its tree is not admitted", c.Name)
		}
	}
}
