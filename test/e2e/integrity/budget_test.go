package integrity

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	jobpkg "github.com/lockstep-dev/lockstep/internal/jobintegration/job"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// plainJob creates a 2-rank GPU Job as a new user writes it — Indexed,
// restartPolicy Never, backoffLimit 0, no podFailurePolicy — and returns it
// as the API server stored it.
func plainJob(t *testing.T, ctx context.Context, h *harness.Harness, ns string, tweaks ...func(*batchv1.Job)) *batchv1.Job {
	t.Helper()
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := builders.IndexedJob(ns, "train", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj())
	for _, tweak := range tweaks {
		tweak(job)
	}
	created, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Before the namespace goes: a per-index Job keeps its failed pods'
	// finalizers while it cannot create replacements in a terminating
	// namespace.
	t.Cleanup(func() {
		_ = h.Client.BatchV1().Jobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	return created
}

func jobFailed(j *batchv1.Job) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// TestGangRestartCostsTheJobNothing is issue 38's Job: 2 ranks,
// backoffLimit 0, no podFailurePolicy. Admission gives it the rule that
// ignores disruptions and a per-index backoff (and says so on the Job); one
// rank's GPU reported Unhealthy restarts the gang whole; the Job runs again
// whole with no failure counted. The same with a rule of the user's own,
// which admission leaves as written (a Job-wide backoff): the time from the
// restart to the gang running again is logged for both. The Job kept as
// written (the restart-budget annotation) fails on that restart: the rule
// is what keeps it alive.
func TestGangRestartCostsTheJobNothing(t *testing.T) {
	h := harness.Get(t)
	rule := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{jobpkg.IgnoreDisruptions()}}
	for _, tc := range []struct {
		name    string
		tweak   func(*batchv1.Job)
		wantSet string
		// asWritten: the Job keeps no rule, and the restart fails it.
		asWritten bool
	}{
		{name: "defaulted: the rule and a per-index backoff", wantSet: "podFailurePolicy,podReplacementPolicy,backoffLimitPerIndex"},
		{name: "the user's own rule: a Job-wide backoff", tweak: func(j *batchv1.Job) { j.Spec.PodFailurePolicy = rule.DeepCopy() }},
		{name: "kept as written", asWritten: true, tweak: func(j *batchv1.Job) {
			j.Annotations = map[string]string{jobpkg.RestartBudgetAnnotation: jobpkg.RestartBudgetAsWritten}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := h.Namespace(t)
			ctx := harness.Context(t, 3*time.Minute)
			var tweaks []func(*batchv1.Job)
			if tc.tweak != nil {
				tweaks = append(tweaks, tc.tweak)
			}
			job := plainJob(t, ctx, h, ns, tweaks...)
			want := rule
			if tc.asWritten {
				want = nil
			}
			if d := cmp.Diff(want, job.Spec.PodFailurePolicy); d != "" {
				t.Fatalf("the Job's podFailurePolicy after admission (-want,+got):\n%s", d)
			}
			if got := job.Annotations[jobpkg.RestartBudgetDefaultedAnnotation]; got != tc.wantSet {
				t.Errorf("annotation %s = %q, want %q", jobpkg.RestartBudgetDefaultedAnnotation, got, tc.wantSet)
			}
			if perIndex := job.Spec.BackoffLimitPerIndex != nil; perIndex != (tc.wantSet != "") || perIndex && *job.Spec.BackoffLimitPerIndex != *job.Spec.BackoffLimit {
				t.Errorf("backoffLimitPerIndex %v (backoffLimit %d): want the Job-wide limit exactly when admission set it", job.Spec.BackoffLimitPerIndex, *job.Spec.BackoffLimit)
			}
			if !tc.asWritten {
				t.Logf("%s: the gang ran again whole %s after the restart", tc.name, h.RestartOnUnhealthyDevice(t, ctx, ns, "train", 2).Round(100*time.Millisecond))
				j, err := h.Client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if c := jobFailed(j); c != nil || j.Status.Failed != 0 {
					t.Errorf("the gang restart cost the Job: failed %d, condition %+v", j.Status.Failed, c)
				}
				return
			}
			before := h.WaitRunning(t, ctx, ns, "train", 2)
			h.ReportDeviceHealth(t, ctx, ns, someRank(before), corev1.ResourceHealthStatusUnhealthy)
			harness.Eventually(t, ctx, "the restart fails the Job kept as written (backoffLimit 0)", func(ctx context.Context) (bool, string, error) {
				j, err := h.Client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				return jobFailed(j) != nil, fmt.Sprintf("failed %d", j.Status.Failed), nil
			})
		})
	}
}

// TestRankFailingOnItsOwnStillFailsTheJob: the rule ignores disruptions
// only — a rank that exits 1 by itself counts exactly as the user wrote:
// with backoffLimit 0 the Job fails (BackoffLimitExceeded).
func TestRankFailingOnItsOwnStillFailsTheJob(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	job := plainJob(t, ctx, h, ns, func(j *batchv1.Job) {
		j.Spec.Template.Annotations = map[string]string{"sim.lockstep.dev/fail-after-by-index": "1h,3s"}
	})
	if job.Spec.PodFailurePolicy == nil {
		t.Fatal("admission gave the Job no podFailurePolicy")
	}
	harness.Eventually(t, ctx, "the Job failed by its rank's own failure", func(ctx context.Context) (bool, string, error) {
		j, err := h.Client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c := jobFailed(j)
		if c == nil {
			return false, fmt.Sprintf("failed %d, not failed", j.Status.Failed), nil
		}
		if c.Reason != batchv1.JobReasonBackoffLimitExceeded {
			return false, "", fmt.Errorf("the Job failed for %s (%s), want %s", c.Reason, c.Message, batchv1.JobReasonBackoffLimitExceeded)
		}
		return j.Status.Failed >= 1, fmt.Sprintf("failed %d", j.Status.Failed), nil
	})
}

// TestNamespaceOfARunningGangJobGoes: deleting the namespace of a running
// gang Job whose per-index backoff admission set — nothing deleted first —
// completes: kube-controller-manager deletes the pods first, the Job
// controller would keep each index's last failed pod until it could create
// a replacement (which a terminating namespace refuses), and Lockstep
// deletes the Job so that it lets them go.
func TestNamespaceOfARunningGangJobGoes(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job, err := h.Client.BatchV1().Jobs(ns).Create(ctx, builders.IndexedJob(ns, "train", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Spec.BackoffLimitPerIndex == nil {
		t.Fatal("admission set no per-index backoff")
	}
	h.WaitRunning(t, ctx, ns, "train", 2)
	if err := h.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	harness.Eventually(t, ctx, "the namespace gone", func(ctx context.Context) (bool, string, error) {
		_, err := h.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		pods, _ := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return false, fmt.Sprintf("%d pods left (err %v)", len(pods.Items), err), nil
	})
	t.Logf("the namespace was gone %s after its deletion", time.Since(deleted).Round(100*time.Millisecond))
}
