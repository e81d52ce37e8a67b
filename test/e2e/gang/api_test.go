package gang

import (
	"context"
	"strings"
	"testing"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// The CRD's OpenAPI and CEL rules reject, through the real API server, what
// can be checked statically.
func TestPodGroupValidation(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, time.Minute)
	pgs := h.Dynamic.Resource(podgroup.Resource).Namespace(ns)
	obj := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.lockstep.dev/v1beta1", "kind": "PodGroup",
			"metadata": map[string]any{"name": name}, "spec": spec,
		}}
	}
	gang := func(n int64) map[string]any { return map[string]any{"gang": map[string]any{"minCount": n}} }
	creates := map[string]struct {
		spec    map[string]any
		wantErr string
	}{
		"minCount 0":           {spec: map[string]any{"schedulingPolicy": gang(0)}, wantErr: "should be greater than or equal to 1"},
		"no policy":            {spec: map[string]any{"schedulingPolicy": map[string]any{}}, wantErr: "exactly one of basic or gang must be set"},
		"basic and gang":       {spec: map[string]any{"schedulingPolicy": map[string]any{"basic": map[string]any{}, "gang": map[string]any{"minCount": int64(2)}}}, wantErr: "exactly one of basic or gang must be set"},
		"two disruption modes": {spec: map[string]any{"schedulingPolicy": gang(2), "disruptionMode": map[string]any{"all": map[string]any{}, "single": map[string]any{}}}, wantErr: "exactly one of single or all must be set"},
		"bad preemptionPolicy": {spec: map[string]any{"schedulingPolicy": gang(2), "preemptionPolicy": "Sometimes"}, wantErr: "Unsupported value"},
	}
	for name, tc := range creates {
		t.Run(name, func(t *testing.T) {
			_, err := pgs.Create(ctx, obj("bad", tc.spec), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("want rejection containing %q, got %v", tc.wantErr, err)
			}
		})
	}

	// Immutable fields, and minCount that may change (scaling).
	pc := "pg-validation-" + ns
	if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pc}, Value: 100}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pc, metav1.DeleteOptions{})
	})
	if _, err := pgs.Create(ctx, obj("ok", map[string]any{"schedulingPolicy": gang(2), "priorityClassName": pc, "priority": int64(100)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each change is made to the latest version: Lockstep's controllers
	// write the group's status meanwhile, and a stale update is refused
	// with a conflict before its validation is asked.
	update := func(edit func(*unstructured.Unstructured)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := pgs.Get(ctx, "ok", metav1.GetOptions{})
			if err != nil {
				return err
			}
			edit(cur)
			_, err = pgs.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	if err := update(func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "schedulingPolicy", "gang", "minCount")
	}); err != nil {
		t.Fatalf("minCount must be mutable: %v", err)
	}
	if err := update(func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(1000000), "spec", "priority")
	}); err == nil || !strings.Contains(err.Error(), "priority is immutable") {
		t.Errorf("changing priority: want 'priority is immutable', got %v", err)
	}
	if err := update(func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, map[string]any{"basic": map[string]any{}}, "spec", "schedulingPolicy")
	}); err == nil || !strings.Contains(err.Error(), "cannot change between basic and gang") {
		t.Errorf("gang to basic: want rejection, got %v", err)
	}
}
