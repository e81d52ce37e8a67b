package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func gpuJob(ns, name string, n int32) *batchv1.Job {
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
	return builders.IndexedJob(ns, name, n, pod)
}

func oneGPUTemplate(t *testing.T, ctx context.Context, h *harness.Harness, ns string) {
	t.Helper()
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func jobPods(ctx context.Context, h *harness.Harness, ns, job string) (total, bound int, labelled bool, err error) {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return 0, 0, false, err
	}
	labelled = len(pods.Items) > 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
		if p.Labels[lockv1.PodGroupLabel] != job {
			labelled = false
		}
	}
	return len(pods.Items), bound, labelled, nil
}

// Seed 004 with plain Jobs whose only Lockstep line is schedulerName.
func TestPlainJobsBecomeGangs(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	for _, name := range []string{"train-a", "train-b"} {
		if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, gpuJob(ns, name, 4), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var winner, loser string
	harness.Eventually(t, ctx, "one Job 4/4 bound, every pod in its Job's group", func(ctx context.Context) (bool, string, error) {
		_, a, la, err := jobPods(ctx, h, ns, "train-a")
		if err != nil {
			return false, "", err
		}
		_, b, lb, err := jobPods(ctx, h, ns, "train-b")
		if err != nil {
			return false, "", err
		}
		switch {
		case a == 4:
			winner, loser = "train-a", "train-b"
		case b == 4:
			winner, loser = "train-b", "train-a"
		}
		return winner != "" && la && lb, fmt.Sprintf("train-a %d bound (labelled %v), train-b %d (labelled %v)", a, la, b, lb), nil
	})
	harness.Eventually(t, ctx, loser+" waiting whole with a condition saying why", func(ctx context.Context) (bool, string, error) {
		_, bound, _, err := jobPods(ctx, h, ns, loser)
		if err != nil {
			return false, "", err
		}
		c, err := h.ScheduledCondition(ctx, ns, loser)
		if err != nil || c == nil {
			return false, "no condition", err
		}
		return bound == 0 && c.Reason == lockv1.PodGroupReasonUnschedulable && strings.Contains(c.Message, "no free device of class gpu.example.com"),
			fmt.Sprintf("%d bound; %s: %s", bound, c.Reason, c.Message), nil
	})
	// The group and Workload are the Job's: deleting the Job removes them.
	pg, err := h.PodGroup(ctx, ns, winner)
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].Kind != "Job" || pg.OwnerReferences[0].Name != winner {
		t.Errorf("PodGroup owner: want Job %s, got %+v", winner, pg.OwnerReferences)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 4 || pg.Spec.DisruptionMode == nil || pg.Spec.DisruptionMode.All == nil {
		t.Errorf("PodGroup spec: want gang minCount 4, disruptionMode all; got %+v", pg.Spec)
	}
	if err := h.Client.BatchV1().Jobs(ns).Delete(ctx, winner, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "PodGroup and Workload garbage-collected with the Job", func(ctx context.Context) (bool, string, error) {
		_, errPG := h.Dynamic.Resource(podgroup.Resource).Namespace(ns).Get(ctx, winner, metav1.GetOptions{})
		_, errWL := h.Dynamic.Resource(lockv1.GroupVersion.WithResource("workloads")).Namespace(ns).Get(ctx, winner, metav1.GetOptions{})
		return apierrors.IsNotFound(errPG) && apierrors.IsNotFound(errWL), fmt.Sprintf("podgroup: %v, workload: %v", errPG, errWL), nil
	})
	harness.Eventually(t, ctx, loser+" gets all 4 GPUs", func(ctx context.Context) (bool, string, error) {
		_, bound, _, err := jobPods(ctx, h, ns, loser)
		return bound == 4, fmt.Sprintf("%d bound", bound), err
	})
}

func TestSuspendedJobWaitsUntilResumed(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	job := gpuJob(ns, "held", 3)
	job.Spec.Suspend = ptr.To(true)
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if total, bound, _, err := jobPods(ctx, h, ns, "held"); err != nil || bound != 0 || total != 0 {
		t.Fatalf("suspended Job: want no pods scheduled, got %d pods, %d bound (err %v)", total, bound, err)
	}
	if _, err := h.Client.BatchV1().Jobs(ns).Patch(ctx, "held", "application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "resumed Job bound whole", func(ctx context.Context) (bool, string, error) {
		_, bound, labelled, err := jobPods(ctx, h, ns, "held")
		return bound == 3 && labelled, fmt.Sprintf("%d bound", bound), err
	})
}

func TestNonQualifyingJobRunsPodByPodWithEvent(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	job := gpuJob(ns, "ragged", 2)
	job.Spec.Completions = ptr.To[int32](4)
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "an event naming the failed condition and the fix", func(ctx context.Context) (bool, string, error) {
		evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Job,involvedObject.name=ragged"})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.Reason == "NotGangScheduled" && strings.Contains(e.Message, "completions (4) differs from parallelism (2)") && strings.Contains(e.Message, "set spec.completions: 2") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items)), nil
	})
	harness.Eventually(t, ctx, "its pods scheduled one by one", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=ragged"})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Labels[lockv1.PodGroupLabel] != "" {
				return false, "", fmt.Errorf("pod %s of a non-qualifying Job got a group label", p.Name)
			}
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 2, fmt.Sprintf("%d bound", bound), nil
	})
	if _, err := h.PodGroup(ctx, ns, "ragged"); !apierrors.IsNotFound(err) {
		t.Errorf("a non-qualifying Job must get no PodGroup; got err %v", err)
	}
}
