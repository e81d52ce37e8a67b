package crash

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestTreeStatusAfterACrashBetweenBindAndStatus: a scheduler that dies
// right after binding a tree's last member — before it writes any status —
// leaves the root and its groups saying what they said before. The next
// scheduler finds nothing to place and writes what the bound members
// earned: the root's CompositePodGroupInitiallyScheduled and each group's
// PodGroupInitiallyScheduled True, each group's incarnation recorded; it
// binds nothing again and the claims stay consistent.
func TestTreeStatusAfterACrashBetweenBindAndStatus(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: lockv1.CompositePodGroupSpec{SchedulingPolicy: lockv1.CompositePodGroupSchedulingPolicy{Gang: &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 2}}}}
	u, err := podgroup.CompositeToUnstructured(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	groups := []string{"w1", "w2"}
	for _, g := range groups {
		pg := builders.GangPodGroup(ns, g, 2)
		pg.Spec.ParentCompositePodGroupName = ptr.To("job")
		h.CreatePodGroup(ctx, t, pg)
		for i := range 2 {
			createMember(t, ctx, h, ns, g, i)
		}
	}
	harness.Eventually(t, ctx, "every member's claim generated", func(ctx context.Context) (bool, string, error) {
		claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(claims.Items) == 4, fmt.Sprintf("%d claims", len(claims.Items)), nil
	})

	// The 4th binding is the tree's last: the process exits right after it.
	crashy := h.StartScheduler(t, "crashy-tree", nil, "--leader-elect=false", "--test-crash-after-binds=4")
	select {
	case <-crashy.Done:
	case <-ctx.Done():
		t.Fatal("the scheduler never reached the crash point")
	}
	if crashy.ExitCode != 3 {
		t.Fatalf("scheduler exited with %d, want 3 (the crash hook)", crashy.ExitCode)
	}
	bound := func(ctx context.Context) (int, error) {
		n := 0
		for _, g := range groups {
			_, b, err := h.GroupPods(ctx, ns, g)
			if err != nil {
				return 0, err
			}
			n += b
		}
		return n, nil
	}
	if n, err := bound(ctx); err != nil || n != 4 {
		t.Fatalf("at the crash: %d of 4 bound (%v), want all: the hook exits after the last binding", n, err)
	}
	for _, g := range groups {
		pg, err := h.PodGroup(ctx, ns, g)
		if err != nil {
			t.Fatal(err)
		}
		if meta.IsStatusConditionTrue(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled) {
			t.Fatalf("%s: InitiallyScheduled already True at the crash: the crash point is after the status write", g)
		}
	}

	h.StartScheduler(t, "recovered-tree", nil, "--leader-elect=false")
	harness.Eventually(t, ctx, "the root and its groups say what their bound members earned", func(ctx context.Context) (bool, string, error) {
		u, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Get(ctx, "job", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c, err := podgroup.CompositeFromUnstructured(u)
		if err != nil {
			return false, "", err
		}
		if cond := meta.FindStatusCondition(c.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled); cond == nil || cond.Status != metav1.ConditionTrue {
			return false, fmt.Sprintf("root condition %+v", cond), nil
		}
		for _, g := range groups {
			pg, err := h.PodGroup(ctx, ns, g)
			if err != nil {
				return false, "", err
			}
			cond := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled)
			if cond == nil || cond.Status != metav1.ConditionTrue {
				return false, fmt.Sprintf("%s condition %+v", g, cond), nil
			}
			if inc := pg.Status.Incarnation; inc == nil || len(inc.Members) != 2 {
				return false, fmt.Sprintf("%s incarnation %+v", g, inc), nil
			}
		}
		return true, "", nil
	})
	if n, err := bound(ctx); err != nil || n != 4 {
		t.Errorf("after the restart: %d of 4 bound (%v)", n, err)
	}
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodFailed {
			t.Errorf("pod %s failed", p.Name)
		}
	}
	if err := consistent(ctx, h, ns); err != nil {
		t.Error(err)
	}
}
