package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// gangJob creates an Indexed Job of n ranks scheduled by Lockstep whose
// podFailurePolicy ignores disruptions (docs/integrity.md); gpu gives each
// rank one GPU claim; podAnnotations go on the pod template (simulator
// timings). The Job is deleted before the namespace.
func gangJob(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, n int32, gpu bool, podAnnotations map[string]string) *batchv1.Job {
	t.Helper()
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1")
	if gpu {
		if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		pod = pod.ClaimTemplate("gpu", "one-gpu")
	}
	for k, v := range podAnnotations {
		pod = pod.Annotation(k, v)
	}
	job := builders.IndexedJob(ns, name, n, pod.Obj())
	job.Spec.BackoffLimit = nil
	job.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}}}
	created, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	return created
}

// barePods creates n pods of a Lockstep PodGroup, requesting cpu each,
// 16 at a time; annotate returns each pod's annotations (may be nil).
func barePods(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, n int, cpu string, annotate func(i int) map[string]string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			w := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i)).Member(group).Req(corev1.ResourceCPU, cpu)
			if annotate != nil {
				for k, v := range annotate(i) {
					w = w.Annotation(k, v)
				}
			}
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, w.Obj(), metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating pods of %s: %v", group, err)
	}
}

// waitRunning waits until exactly n pods of the group run, and returns them.
func waitRunning(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, n int) map[types.UID]string {
	t.Helper()
	return h.WaitRunning(t, ctx, ns, group, n)
}

// stillRunning counts the pods of before that still run.
func stillRunning(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, before map[types.UID]string) int {
	t.Helper()
	now, err := h.RunningPods(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for uid := range before {
		if _, ok := now[uid]; ok {
			n++
		}
	}
	return n
}

// jobCondition reports whether the Job has condition typ=True.
func jobCondition(ctx context.Context, h *harness.Harness, ns, name string, typ batchv1.JobConditionType) (bool, error) {
	job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range job.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true, nil
		}
	}
	return false, nil
}

// outcomes counts the current incarnation's members by outcome ("" running).
func outcomes(st harness.GroupState) map[lockv1.MemberOutcome]int {
	out := map[lockv1.MemberOutcome]int{}
	if st.Incarnation != nil {
		for _, m := range st.Incarnation.Members {
			out[m.Outcome]++
		}
	}
	return out
}
