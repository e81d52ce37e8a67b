package demo

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// mode is one column of the comparison.
type mode struct {
	name string
	// ramp: the jobs' ranks arrive interleaved, one rank of each job at a
	// time (the arrival pattern behind seed 004's 3 + 3; without it the
	// pod-by-pod result depends on timing). The gang columns do not ramp: a
	// Job is a gang of its parallelism from the start, and gang admission
	// does not depend on arrival order.
	ramp       bool
	profile    devcluster.Profile
	schedulers []devcluster.Scheduler
	// gang: how the jobs ask for all-or-nothing placement.
	gang gangStyle
}

type gangStyle int

const (
	podByPod    gangStyle = iota // plain Jobs, kube-scheduler
	inTreeGang                   // Job spec.scheduling gang.minCount (needs the upstream gates)
	lockstepJob                  // plain Job with schedulerName lockstep (the Job integration makes the gang)
)

var modes = []mode{
	{name: "kube-scheduler 1.37, pod by pod", ramp: true, profile: devcluster.ProfileEKS, schedulers: []devcluster.Scheduler{devcluster.SchedulerKube}, gang: podByPod},
	{name: "kube-scheduler 1.37, in-tree gang", profile: devcluster.ProfileUpstream, schedulers: []devcluster.Scheduler{devcluster.SchedulerKube}, gang: inTreeGang},
	{name: "Lockstep (eks profile, no gates)", profile: devcluster.ProfileEKS, schedulers: []devcluster.Scheduler{devcluster.SchedulerLockstep}, gang: lockstepJob},
}

const (
	namespace = "ml-team"
	ranks     = 4
)

var jobs = []string{"train-a", "train-b"}

// createSeed004 creates the two 4-rank jobs, one GPU per rank through a
// ResourceClaimTemplate, as the given mode expresses gangs.
func createSeed004(ctx context.Context, client kubernetes.Interface, m mode) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "one-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Both jobs are submitted at the same moment, as two teams would: the Job
	// controller then creates their ranks interleaved (slow start: 1, 2, 1).
	errs := make(chan error, len(jobs))
	for _, name := range jobs {
		go func() {
			_, err := client.BatchV1().Jobs(namespace).Create(ctx, job(name, m), metav1.CreateOptions{})
			if err != nil {
				err = fmt.Errorf("job %s: %w", name, err)
			}
			errs <- err
		}()
	}
	var first error
	for range jobs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil || !m.ramp {
		return first
	}
	return rampUp(ctx, client)
}

// rampUp raises both jobs' parallelism one rank at a time, alternately,
// waiting for each new rank to exist and the scheduler to act on it.
func rampUp(ctx context.Context, client kubernetes.Interface) error {
	for r := int32(2); r <= ranks; r++ {
		for _, name := range jobs {
			patch := fmt.Sprintf(`{"spec":{"parallelism":%d}}`, r)
			if _, err := client.BatchV1().Jobs(namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
			if err := waitRanks(ctx, client, name, int(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitRanks waits until the job has n pods and the newest one is bound or
// has been found unschedulable.
func waitRanks(ctx context.Context, client kubernetes.Interface, job string, n int) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "demo.lockstep.dev/job=" + job})
		if err != nil || len(pods.Items) < n {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" && !decided(&p) {
				return false, nil
			}
		}
		return true, nil
	})
}

// decided: the scheduler looked at the pod and could not place it (pod by
// pod), or it waits for its gang (Lockstep leaves it unconditioned until the
// group has minCount members, so a pending gang member counts as decided).
func decided(p *corev1.Pod) bool {
	if p.Spec.SchedulerName == lockv1.SchedulerName {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	return false
}

func job(name string, m mode) *batchv1.Job {
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"demo.lockstep.dev/job": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyNever,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
			Containers: []corev1.Container{{
				Name: "trainer", Image: "registry.example/trainer:v1",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
					Claims:   []corev1.ResourceClaim{{Name: "gpu"}},
				},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	parallelism := int32(ranks)
	if m.ramp {
		parallelism = 1
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(parallelism), Completions: ptr.To[int32](ranks),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), BackoffLimit: ptr.To[int32](0),
			Template: pod,
		},
	}
	switch m.gang {
	case inTreeGang:
		j.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
			Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](ranks)},
		}}
	case lockstepJob:
		j.Spec.Template.Spec.SchedulerName = lockv1.SchedulerName
	}
	return j
}
