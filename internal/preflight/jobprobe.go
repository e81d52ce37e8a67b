package preflight

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// CheckJobField names the Job spec.scheduling check.
const CheckJobField = "Job spec.scheduling"

// ProbeLabel marks the Job the end-to-end probe creates (and deletes).
const ProbeLabel = "scheduling.lockstep.dev/preflight-probe"

var workloads = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "workloads"}

// probeJob is a 2-rank gang Job. It is suspended: it never creates a pod,
// and kube-controller-manager's Job controller still creates its Workload
// on its first sync when WorkloadWithJob is on.
func probeJob(namespace string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "lockstep-preflight-", Namespace: namespace, Labels: map[string]string{ProbeLabel: "true"}},
		Spec: batchv1.JobSpec{
			Suspend:     ptr.To(true),
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Scheduling: &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](2)},
			}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "probe", Image: "probe"}},
			}},
		},
	}
}

// checkJobField finds out, end to end, what a Job with spec.scheduling
// gets: a dry run shows whether kube-apiserver keeps the field (without
// WorkloadWithJob it prunes it silently); when it does, a real suspended
// Job shows whether kube-controller-manager acts on it (with its gate off
// it creates no Workload, and the Job's pods would be scheduled one by one).
// The Job is deleted, with what it owns, whatever the outcome.
func checkJobField(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, namespace string, timeout time.Duration) Check {
	out, err := client.BatchV1().Jobs(namespace).Create(ctx, probeJob(namespace), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err != nil:
		return Check{Name: CheckJobField, Status: Warn, Detail: "could not dry-run a Job: " + err.Error(),
			Fix: fmt.Sprintf("run preflight with permission to create Jobs in namespace %s (--probe-namespace)", namespace)}
	case out.Spec.Scheduling == nil || out.Spec.Scheduling.SchedulingPolicy == nil:
		return Check{Name: CheckJobField, Status: Info, Detail: "pruned silently by the API server (WorkloadWithJob is off): kubectl apply succeeds and nothing happens",
			Fix: "use schedulerName: lockstep on the Job's pod template instead; Lockstep's Job integration needs no gate"}
	}
	if !served(client, "scheduling.k8s.io/v1beta1", "workloads") {
		return controllerOff("kube-apiserver keeps Job spec.scheduling but does not serve scheduling.k8s.io/v1beta1 Workloads (GenericWorkload off), so no controller can create one")
	}
	job, err := client.BatchV1().Jobs(namespace).Create(ctx, probeJob(namespace), metav1.CreateOptions{})
	if err != nil {
		return Check{Name: CheckJobField, Status: Warn, Detail: "kube-apiserver keeps the field; could not create the probe Job to see whether kube-controller-manager acts on it: " + err.Error(),
			Fix: fmt.Sprintf("run preflight with permission to create and delete Jobs in namespace %s (--probe-namespace)", namespace)}
	}
	c := judgeProbe(ctx, dyn, job, timeout)
	if err := deleteProbe(ctx, client, job); err != nil {
		c.Detail += fmt.Sprintf("; the probe Job %s/%s could not be deleted: %v", job.Namespace, job.Name, err)
		c.Fix = fmt.Sprintf("delete it: kubectl delete job -n %s %s", job.Namespace, job.Name)
		if c.Status != Fail {
			c.Status = Warn
		}
	}
	return c
}

// judgeProbe is what the probe Job shows of kube-controller-manager.
func judgeProbe(ctx context.Context, dyn dynamic.Interface, job *batchv1.Job, timeout time.Duration) Check {
	name, err := ownedWorkload(ctx, dyn, job, timeout)
	switch {
	case err != nil:
		return Check{Name: CheckJobField, Status: Warn, Detail: "kube-apiserver keeps the field; could not list Workloads: " + err.Error(),
			Fix: "run preflight with permission to list workloads.scheduling.k8s.io"}
	case name == "":
		return controllerOff(fmt.Sprintf("kube-apiserver keeps Job spec.scheduling, but kube-controller-manager created no Workload for a probe Job within %s (WorkloadWithJob off there, or its Job controller not running)", timeout))
	}
	return Check{Name: CheckJobField, Status: Info, Detail: fmt.Sprintf("kept, and kube-controller-manager created Workload %s for a probe Job (WorkloadWithJob on in both; the probe is deleted)", name)}
}

func controllerOff(detail string) Check {
	return Check{Name: CheckJobField, Status: Fail,
		Detail: detail + ": Jobs with spec.scheduling are accepted and their pods scheduled one by one, not as a gang",
		Fix:    "turn WorkloadWithJob (and GenericWorkload) on in kube-controller-manager as in kube-apiserver, or use schedulerName: lockstep on the Job's pod template instead of spec.scheduling"}
}

// ownedWorkload waits up to timeout for a Workload controlled by job and
// returns its name ("" if none came). A refusal (forbidden, unauthorized,
// not served) ends the wait with its error at once; any other failed list
// — a timeout, a restarting API server, the client's rate limiter refusing
// a wait that would outlast the deadline — is retried by the next poll, and
// is the answer only if no list ever succeeded.
func ownedWorkload(ctx context.Context, dyn dynamic.Interface, job *batchv1.Job, timeout time.Duration) (string, error) {
	var (
		name    string
		listed  bool
		lastErr error
	)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(workloads).Namespace(job.Namespace).List(ctx, metav1.ListOptions{})
		switch {
		case err == nil:
			listed = true
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			return false, err
		default:
			lastErr = err
			return false, nil
		}
		for _, w := range list.Items {
			if ref := metav1.GetControllerOf(&w); ref != nil && ref.UID == job.UID {
				name = w.GetName()
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case name != "":
		return name, nil
	case !wait.Interrupted(err):
		return "", err
	case !listed && lastErr != nil:
		return "", lastErr
	}
	return "", nil
}

// deleteProbe deletes the probe Job and, through the garbage collector,
// the Workload and PodGroup it owns; it runs even when ctx was cancelled.
func deleteProbe(ctx context.Context, client kubernetes.Interface, job *batchv1.Job) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	uid := types.UID(job.UID)
	err := client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
