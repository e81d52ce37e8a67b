package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// Issue 28, finding 9: a gang whose Job controller cannot create its pods —
// the namespace's ResourceQuota has no room — says so on its PodGroup,
// naming the quota, the resource and the fix (not only "waiting for
// pods"), with an event on the group and the Job; raising the quota lets
// the Job controller create them, the gang is placed whole, and the
// condition goes.
func TestQuotaBlockedGangSaysWhich(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "compute"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("2")}}}
	if _, err := h.Client.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the quota counted by the API server", func(ctx context.Context) (bool, string, error) {
		q, err := h.Client.CoreV1().ResourceQuotas(ns).Get(ctx, "compute", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, "no status yet", err
	})
	rank := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").Obj()
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, builders.IndexedJob(ns, "train", 4, rank), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"2 of minCount 4 pods do not exist", "Job train's pods cannot be created", "ResourceQuota compute has no room for another",
		"requests.cpu: 2 used of 2, a pod requests 1", "raise the quota's spec.hard[requests.cpu] to at least 4"}
	harness.Eventually(t, ctx, "PodCreationBlocked on the PodGroup, naming the quota, the resource and the fix", func(ctx context.Context) (bool, string, error) {
		pg, err := h.PodGroup(ctx, ns, "train")
		if err != nil {
			return false, "no PodGroup yet", nil
		}
		c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodCreationBlocked)
		if c == nil {
			return false, "no PodCreationBlocked condition", nil
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return false, c.Message, nil
			}
		}
		return c.Status == metav1.ConditionTrue && c.Reason == lockv1.PodCreationReasonQuotaExceeded, c.Reason + ": " + c.Message, nil
	})
	for _, kind := range []string{"PodGroup", "Job"} {
		harness.Eventually(t, ctx, "a QuotaExceeded event on the "+kind, func(ctx context.Context) (bool, string, error) {
			return hasEvent(ctx, h, ns, kind, "train", lockv1.PodCreationReasonQuotaExceeded, want...)
		})
	}
	if _, err := h.Client.CoreV1().ResourceQuotas(ns).Patch(ctx, "compute", "application/merge-patch+json", []byte(`{"spec":{"hard":{"requests.cpu":"4"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the gang created and bound whole, the condition gone", func(ctx context.Context) (bool, string, error) {
		pg, err := h.PodGroup(ctx, ns, "train")
		if err != nil {
			return false, "", err
		}
		_, bound, _, err := jobPods(ctx, h, ns, "train")
		c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodCreationBlocked)
		return bound == 4 && c == nil, fmt.Sprintf("%d bound, condition %v", bound, c), err
	})
}
