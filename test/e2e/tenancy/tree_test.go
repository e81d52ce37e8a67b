package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestTreeLayoutIsValidated: through the real API server and webhook, a
// CompositePodGroup that would close a cycle, a 5th level of
// CompositePodGroups and a 9th child of a parent are refused at
// spec.parentCompositePodGroupName, naming the failed condition; the
// 4-level chain and 8 children of one parent are admitted; and neither
// a PodGroup's parent nor a CompositePodGroup's scheduling policy can be
// changed.
func TestTreeLayoutIsValidated(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	for i := 1; i <= lockv1.MaxTreeDepth; i++ {
		parent := ""
		if i > 1 {
			parent = fmt.Sprintf("c%d", i-1)
		}
		if err := createComposite(ctx, h, cpg(ns, fmt.Sprintf("c%d", i), parent), false); err != nil {
			t.Fatalf("level %d of 4: want it admitted, got %v", i, err)
		}
	}
	for i := range lockv1.MaxChildren - 1 { // c2 is c1's first child
		if err := h.CreatePodGroupErr(ctx, under(builders.GangPodGroup(ns, fmt.Sprintf("g%d", i), 1), "c1")); err != nil {
			t.Fatalf("child %d of 8: want it admitted, got %v", i+2, err)
		}
	}
	if err := createComposite(ctx, h, cpg(ns, "a", "b"), false); err != nil {
		t.Fatalf("a CompositePodGroup whose parent does not exist yet: want it admitted (it waits), got %v", err)
	}
	for name, tc := range map[string]struct {
		c    *lockv1.CompositePodGroup
		want string
	}{
		"a cycle":       {c: cpg(ns, "b", "a"), want: "the parents form a cycle (a → b)"},
		"a 5th level":   {c: cpg(ns, "c5", "c4"), want: "the tree would have 5 levels of CompositePodGroups"},
		"a 9th child":   {c: cpg(ns, "k9", "c1"), want: "CompositePodGroup c1 already has 8 children"},
		"its own child": {c: cpg(ns, "self", "self"), want: "cannot be its own parent"},
	} {
		t.Run(name, func(t *testing.T) {
			// The webhook reads its caches: a dry run (which calls it,
			// storing nothing) is refused once they show the objects
			// created above; then the creation itself must be.
			harness.Eventually(t, ctx, name+" refused on a dry run", func(ctx context.Context) (bool, string, error) {
				err := createComposite(ctx, h, tc.c, true)
				return err != nil && strings.Contains(err.Error(), tc.want), fmt.Sprint(err), nil
			})
			err := createComposite(ctx, h, tc.c, false)
			if err == nil || !strings.Contains(err.Error(), "spec.parentCompositePodGroupName") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want a refusal at spec.parentCompositePodGroupName saying %q, got %v", tc.want, err)
			}
		})
	}
	t.Run("a PodGroup's parent changed", func(t *testing.T) {
		err := updatePodGroup(ctx, h, ns, "g0", func(pg *lockv1.PodGroup) { pg.Spec.ParentCompositePodGroupName = ptr.To("c2") })
		if err == nil || !strings.Contains(err.Error(), "spec.parentCompositePodGroupName") || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("want a refusal naming spec.parentCompositePodGroupName as immutable, got %v", err)
		}
	})
	t.Run("a CompositePodGroup's policy changed", func(t *testing.T) {
		res := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns)
		u, err := res.Get(ctx, "c1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, int64(2), "spec", "schedulingPolicy", "gang", "minGroupCount"); err != nil {
			t.Fatal(err)
		}
		_, err = res.Update(ctx, u, metav1.UpdateOptions{})
		if err == nil || !strings.Contains(err.Error(), "spec.schedulingPolicy") || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("want a refusal naming spec.schedulingPolicy as immutable, got %v", err)
		}
	})
}

// cpg is a gang CompositePodGroup (minGroupCount 1) under parent ("" for a
// root).
func cpg(ns, name, parent string) *lockv1.CompositePodGroup {
	c := &lockv1.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lockv1.CompositePodGroupSpec{SchedulingPolicy: lockv1.CompositePodGroupSchedulingPolicy{
			Gang: &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 1}}},
	}
	if parent != "" {
		c.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	return c
}

func under(pg *lockv1.PodGroup, parent string) *lockv1.PodGroup {
	pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	return pg
}

// createComposite creates c (a dry run, storing nothing, if dryRun) and
// returns the API server's answer.
func createComposite(ctx context.Context, h *harness.Harness, c *lockv1.CompositePodGroup, dryRun bool) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(lockv1.GroupVersion.WithKind("CompositePodGroup"))
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = h.Dynamic.Resource(podgroup.CompositeResource).Namespace(c.Namespace).Create(ctx, u, opts)
	return err
}
