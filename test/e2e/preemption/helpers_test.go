package preemption

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// Priority classes of the scenarios (cluster-scoped, shared by the tests).
const (
	classLow         = "e2e-low"          // 100
	classUrgent      = "e2e-urgent"       // 10000
	classUrgentNever = "e2e-urgent-never" // 10000, preemptionPolicy Never
)

func priorityClasses(t *testing.T, ctx context.Context, h *harness.Harness) {
	t.Helper()
	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: classLow}, Value: 100},
		{ObjectMeta: metav1.ObjectMeta{Name: classUrgent}, Value: 10000},
		{ObjectMeta: metav1.ObjectMeta{Name: classUrgentNever}, Value: 10000, PreemptionPolicy: ptr.To(corev1.PreemptNever)},
	} {
		if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// accelerator is how a rank gets its accelerator.
type accelerator int

const (
	draGPU   accelerator = iota // a ResourceClaimTemplate for one gpu.example.com device
	extended                    // example.com/accel: 1
)

func (a accelerator) String() string {
	if a == draGPU {
		return "DRA gpu.example.com"
	}
	return "extended resource example.com/accel"
}

// gangJob is an Indexed Job of n ranks scheduled by Lockstep (so a gang),
// one accelerator per rank, whose podFailurePolicy ignores disruptions so
// preemption does not consume backoffLimit. backoffLimitPerIndex keeps the
// Job controller's replacement backoff per index (10 s) instead of doubling
// per failed pod across the Job (docs/integrity.md).
func gangJob(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, n int32, acc accelerator, class string, annotations, podAnnotations map[string]string) {
	t.Helper()
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1")
	switch acc {
	case draGPU:
		if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, "one-gpu", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pod = pod.ClaimTemplate("gpu", "one-gpu")
	case extended:
		pod = pod.Req("example.com/accel", "1")
	}
	for k, v := range podAnnotations {
		pod = pod.Annotation(k, v)
	}
	p := pod.Obj()
	p.Spec.PriorityClassName = class
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	job := builders.IndexedJob(ns, name, n, p)
	job.Annotations = annotations
	job.Spec.BackoffLimit = nil
	job.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}}}
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteJob(h, ns, name) })
}

// deleteJob runs before the namespace is deleted (cleanups run last in,
// first out): namespace deletion removes pods first, and a Job with
// backoffLimitPerIndex keeps each index's last failed pod (its finalizer)
// until it can create a replacement, which a terminating namespace refuses.
// A deleted Job releases its pods.
func deleteJob(h *harness.Harness, ns, name string) {
	_ = h.Client.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
}

// ranks returns the job's pods: running (bound, Running, not terminating)
// by UID, and how many are bound in any state but terminal.
func ranks(ctx context.Context, h *harness.Harness, ns, job string) (running map[types.UID]string, bound int, err error) {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return nil, 0, err
	}
	running = map[types.UID]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		bound++
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running[p.UID] = p.Name
		}
	}
	return running, bound, nil
}

func waitRunning(t *testing.T, ctx context.Context, h *harness.Harness, ns, job string, n int) map[types.UID]string {
	t.Helper()
	var running map[types.UID]string
	harness.Eventually(t, ctx, fmt.Sprintf("%d ranks of %s running", n, job), func(ctx context.Context) (bool, string, error) {
		r, _, err := ranks(ctx, h, ns, job)
		running = r
		return len(r) == n, fmt.Sprintf("%d running", len(r)), err
	})
	return running
}

// stillRunning counts the pods of before that still run.
func stillRunning(t *testing.T, ctx context.Context, h *harness.Harness, ns, job string, before map[types.UID]string) int {
	t.Helper()
	now, _, err := ranks(ctx, h, ns, job)
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

// eventNotes returns the notes of events with reason about the object name.
func eventNotes(t *testing.T, ctx context.Context, h *harness.Harness, ns, kind, name, reason string) []string {
	t.Helper()
	evs, err := h.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

func anyContains(notes []string, sub string) bool {
	for _, n := range notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

func jobFailed(ctx context.Context, h *harness.Harness, ns, name string) (string, error) {
	j, err := h.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Message, nil
		}
	}
	return "", nil
}
