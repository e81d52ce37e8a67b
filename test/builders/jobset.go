package builders

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// ReplicatedJob is one replicated job of a JobSet: replicas Indexed Jobs
// of n pods each, all running at once.
func ReplicatedJob(name string, replicas, n int32, pod *corev1.Pod) jobsetv1.ReplicatedJob {
	job := IndexedJob("", "", n, pod)
	return jobsetv1.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: job.Spec}}
}

// JobSet is a JobSet of the given replicated jobs.
func JobSet(ns, name string, rjobs ...jobsetv1.ReplicatedJob) *jobsetv1.JobSet {
	return &jobsetv1.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: Meta(ns, name),
		Spec:       jobsetv1.JobSetSpec{ReplicatedJobs: rjobs},
	}
}
