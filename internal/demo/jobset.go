package demo

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// runJobSets: two JobSets of a driver and 3 workers (1 GPU per pod),
// the second submitted once the first runs, with 2 GPUs left free. Every
// column runs the real JobSet controller; only schedulerName differs.
func runJobSets(ctx context.Context, e env, m mode, sc scenario, quiet time.Duration) ([]JobState, error) {
	if err := setUp(ctx, e.client, sc); err != nil {
		return nil, err
	}
	first, second := sc.jobs[0], sc.jobs[1]
	if err := createJobSet(ctx, e, jobSet(first, m, sc)); err != nil {
		return nil, err
	}
	if err := waitRunning(ctx, e.client, sc, first, ranks, time.Minute); err != nil {
		return nil, err
	}
	if err := createJobSet(ctx, e, jobSet(second, m, sc)); err != nil {
		return nil, err
	}
	return settle(ctx, e.client, sc, quiet, 90*time.Second, 2*ranks)
}

// jobSet is a driver (1 pod) and workers (one Job of ranks-1 pods), each
// pod with one GPU and the schedulerName of the mode's Jobs. The in-tree gang column's
// JobSet is the pod-by-pod one: JobSet v0.12.0 creates no Workload, so
// kube-scheduler's gang cannot see it.
func jobSet(name string, m mode, sc scenario) *jobsetv1.JobSet {
	pod := job(name, m, sc, 1).Spec.Template
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	rjob := func(rname string, n int32) jobsetv1.ReplicatedJob {
		return jobsetv1.ReplicatedJob{Name: rname, Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To(n), Completions: ptr.To(n), CompletionMode: ptr.To(batchv1.IndexedCompletion), Template: *pod.DeepCopy(),
		}}}
	}
	return &jobsetv1.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: sc.namespace, Name: name},
		Spec:       jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{rjob("driver", 1), rjob("workers", ranks-1)}},
	}
}

func createJobSet(ctx context.Context, e env, js *jobsetv1.JobSet) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(js)
	if err != nil {
		return err
	}
	if _, err := e.dynamic.Resource(jobsetv1.GroupVersion.WithResource("jobsets")).Namespace(js.Namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("jobset %s: %w", js.Name, err)
	}
	return nil
}
