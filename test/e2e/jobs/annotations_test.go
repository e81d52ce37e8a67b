package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestJobAnnotationChanges: on a live gang Job, a changed min-count
// annotation is applied to its PodGroup; a changed disruption mode, which
// the PodGroup fixes at creation, is refused with the reason; a min-count
// larger than the Job is refused.
func TestJobAnnotationChanges(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, gpuJob(ns, "train", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	annotate := func(key, value string) error {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
		_, err := h.Client.BatchV1().Jobs(ns).Patch(ctx, "train", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	harness.Eventually(t, ctx, "the Job's PodGroup", func(ctx context.Context) (bool, string, error) {
		_, err := h.PodGroup(ctx, ns, "train")
		return err == nil, fmt.Sprint(err), nil
	})

	if err := annotate(jobintegration.MinCountAnnotation, "3"); err != nil {
		t.Fatalf("lowering min-count on a live Job: %v", err)
	}
	harness.Eventually(t, ctx, "minCount 3 applied to the PodGroup", func(ctx context.Context) (bool, string, error) {
		pg, err := h.PodGroup(ctx, ns, "train")
		if err != nil {
			return false, "", err
		}
		return pg.Spec.SchedulingPolicy.Gang.MinCount == 3, fmt.Sprintf("minCount %d", pg.Spec.SchedulingPolicy.Gang.MinCount), nil
	})

	err := annotate(jobintegration.DisruptionModeAnnotation, "single")
	for _, want := range []string{jobintegration.DisruptionModeAnnotation, "fixed when its PodGroup is created", "delete and recreate the Job"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("changing the disruption mode: want a refusal containing %q, got %v", want, err)
		}
	}
	err = annotate(jobintegration.MinCountAnnotation, "9")
	if err == nil || !strings.Contains(err.Error(), "larger than the job can ever run") {
		t.Errorf("min-count 9 on a 4-rank Job: want a refusal, got %v", err)
	}
	pg, err := h.PodGroup(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if pg.Spec.DisruptionMode == nil || pg.Spec.DisruptionMode.All == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 3 {
		t.Errorf("refused changes must change nothing: %+v", pg.Spec)
	}
}
