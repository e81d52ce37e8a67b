package builders

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// IndexedJob is an Indexed Job of n pods (parallelism = completions = n)
// whose pods are built from pod; restartPolicy Never and backoffLimit 0
// unless changed.
func IndexedJob(ns, name string, n int32, pod *corev1.Pod) *batchv1.Job {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: Meta(ns, name),
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(n),
			Completions:    ptr.To(n),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:   ptr.To[int32](0),
			Template:       tmpl,
		},
	}
}
