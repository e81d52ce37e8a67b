// Package job is the batch/v1 Job integration.
package job

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// Integration is the batch/v1 Job integration.
type Integration struct{}

var _ jobintegration.Integration = Integration{}

// Name implements Integration.
func (Integration) Name() string { return "batch/job" }

// GVK implements Integration.
func (Integration) GVK() schema.GroupVersionKind { return batchv1.SchemeGroupVersion.WithKind("Job") }

// Resource implements Integration.
func (Integration) Resource() string { return "jobs" }

// Aliases implements Integration.
func (Integration) Aliases() []string { return []string{"job", "jobs"} }

// AddToScheme implements Integration (batch/v1 is in client-go's scheme).
func (Integration) AddToScheme(s *runtime.Scheme) error { return batchv1.AddToScheme(s) }

// AdmissionMatch implements Integration.
func (Integration) AdmissionMatch() string {
	return `object.spec.template.spec.schedulerName == "` + lockv1.SchedulerName + `"`
}

// NewObject implements Integration.
func (Integration) NewObject() client.Object { return &batchv1.Job{} }

// OwnerOf implements Integration: the pod's controller, when it is a Job.
func (i Integration) OwnerOf(_ context.Context, _ jobintegration.Getter, pod *corev1.Pod) (string, types.UID, error) {
	if ref, ok := jobintegration.ControllerOf(pod, i.GVK()); ok {
		return ref.Name, ref.UID, nil
	}
	return "", "", nil
}

// Wrap implements Integration.
func (Integration) Wrap(o client.Object) jobintegration.GenericJob { return &Job{o.(*batchv1.Job)} }

// Job adapts a batch/v1 Job.
type Job struct{ *batchv1.Job }

var (
	_ jobintegration.GenericJob      = (*Job)(nil)
	_ jobintegration.InTreeGanger    = (*Job)(nil)
	_ jobintegration.IndexedJob      = (*Job)(nil)
	_ jobintegration.RestartBudgeter = (*Job)(nil)
)

// Object implements GenericJob.
func (j *Job) Object() client.Object { return j.Job }

// GVK implements GenericJob.
func (j *Job) GVK() schema.GroupVersionKind { return batchv1.SchemeGroupVersion.WithKind("Job") }

// Roles implements GenericJob: one role, the Job's template, parallelism
// pods at once.
func (j *Job) Roles() []jobintegration.Role {
	return []jobintegration.Role{{Name: jobintegration.TemplateName, Template: &j.Spec.Template, Count: j.Size(), Path: field.NewPath("spec", "template")}}
}

// RoleOf implements GenericJob.
func (j *Job) RoleOf(*corev1.Pod) string { return jobintegration.TemplateName }

// Size is parallelism (default 1).
func (j *Job) Size() int32 {
	if j.Spec.Parallelism == nil {
		return 1
	}
	return *j.Spec.Parallelism
}

// Stopped implements GenericJob: suspended, or finished (Complete or
// SuccessCriteriaMet; Failed or FailureTarget) — the Job controller then
// takes the pods down itself.
func (j *Job) Stopped() (string, bool, bool) {
	return jobintegration.StoppedBy(ptr.Deref(j.Spec.Suspend, false), j.Status.Conditions, readCondition,
		[]string{string(batchv1.JobComplete), string(batchv1.JobSuccessCriteriaMet)},
		[]string{string(batchv1.JobFailed), string(batchv1.JobFailureTarget)})
}

func readCondition(c *batchv1.JobCondition) jobintegration.Condition {
	return jobintegration.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason}
}

// Wants implements IndexedJob: an Indexed Job runs indexes 0..completions-1;
// lowering completions (with parallelism, an elastic Indexed Job) removes the
// indexes above.
func (j *Job) Wants(index int32) bool {
	if j.Spec.Completions == nil {
		return index < j.Size()
	}
	return index < *j.Spec.Completions
}

// InTreeGang implements InTreeGanger: upstream WorkloadWithJob's
// spec.scheduling gang policy.
func (j *Job) InTreeGang() bool {
	s := j.Spec.Scheduling
	return s != nil && s.SchedulingPolicy != nil && s.SchedulingPolicy.Gang != nil
}

// Qualify implements GenericJob: the fixed shape upstream's Job integration
// requires — parallelism > 1, Indexed, completions == parallelism, and no
// group already named on the template.
func (j *Job) Qualify() *jobintegration.NotQualified {
	p := j.Size()
	switch {
	case p <= 1:
		return &jobintegration.NotQualified{Condition: fmt.Sprintf("parallelism is %d", p), Fix: "a gang needs parallelism > 1"}
	case j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion:
		return &jobintegration.NotQualified{Condition: "completionMode is not Indexed", Fix: "set spec.completionMode: Indexed so every rank has a stable index"}
	case j.Spec.Completions == nil || *j.Spec.Completions != p:
		c := "unset"
		if j.Spec.Completions != nil {
			c = fmt.Sprint(*j.Spec.Completions)
		}
		return &jobintegration.NotQualified{Condition: fmt.Sprintf("completions (%s) differs from parallelism (%d)", c, p), Fix: fmt.Sprintf("set spec.completions: %d so all ranks run at once", p)}
	case jobintegration.HasGroup(&j.Spec.Template, j.Name):
		return jobintegration.GroupNamed("the pod template", &j.Spec.Template)
	}
	return nil
}

// DefaultRestartBudget implements RestartBudgeter (DefaultRestartBudget),
// recording what it set in RestartBudgetDefaultedAnnotation.
func (j *Job) DefaultRestartBudget() []string {
	set := DefaultRestartBudget(j.Annotations, &j.Spec)
	if len(set) > 0 {
		metav1.SetMetaDataAnnotation(&j.ObjectMeta, RestartBudgetDefaultedAnnotation, defaulted(set))
	}
	return set
}

// RestartBudgetWarnings implements RestartBudgeter.
func (j *Job) RestartBudgetWarnings() []string {
	return RestartBudgetWarnings("the Job", j.Annotations, &j.Spec)
}
