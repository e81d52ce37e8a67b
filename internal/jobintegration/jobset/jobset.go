// Package jobset is the JobSet (jobset.x-k8s.io/v1alpha2) integration. It
// also covers Kubeflow Trainer v2's TrainJob, which runs as a JobSet.
//
// A JobSet is one gang of every pod of every replicated job by default — a
// distributed job needs all its ranks — named after the JobSet. With the
// annotation scheduling.lockstep.dev/gang-scope: role, each replicated job
// is a gang of its own (<jobset>-<replicated job>), independent of the
// others; that is also the default when the JobSet starts its replicated
// jobs in order (startupPolicy InOrder, or dependsOn, as TrainJob's
// initializers do), since a gang over jobs that wait for each other could
// never be placed.
package jobset

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
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/job"
)

// Integration is the JobSet integration.
type Integration struct{}

var _ jobintegration.Integration = Integration{}

var gvk = jobsetv1.GroupVersion.WithKind("JobSet")

// Name implements Integration.
func (Integration) Name() string { return "jobset" }

// GVK implements Integration.
func (Integration) GVK() schema.GroupVersionKind { return gvk }

// Resource implements Integration.
func (Integration) Resource() string { return "jobsets" }

// Aliases implements Integration.
func (Integration) Aliases() []string { return []string{"jobset", "jobsets", "js"} }

// trainJob is Kubeflow Trainer v2's TrainJob, which its controller runs as
// a JobSet of its name.
var trainJob = jobintegration.Wrapper{
	GVK:      schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"},
	Resource: "trainjobs", Aliases: []string{"trainjob", "trainjobs"},
}

// WrappedBy implements jobintegration.Wrapped: a TrainJob runs as a JobSet.
func (Integration) WrappedBy() []jobintegration.Wrapper { return []jobintegration.Wrapper{trainJob} }

// AddToScheme implements Integration.
func (Integration) AddToScheme(s *runtime.Scheme) error { return jobsetv1.AddToScheme(s) }

// AdmissionMatch implements Integration: any replicated job's pods target
// Lockstep (Qualify refuses a JobSet whose replicated jobs disagree).
func (Integration) AdmissionMatch() string {
	return `has(object.spec.replicatedJobs) && object.spec.replicatedJobs.exists(r, has(r.template.spec.template.spec.schedulerName) && r.template.spec.template.spec.schedulerName == "` + lockv1.SchedulerName + `")`
}

// NewObject implements Integration.
func (Integration) NewObject() client.Object { return &jobsetv1.JobSet{} }

// Wrap implements Integration.
func (Integration) Wrap(o client.Object) jobintegration.GenericJob {
	return &JobSet{o.(*jobsetv1.JobSet)}
}

// OwnerOf implements Integration: a JobSet's pods are controlled by its
// child Jobs, which the JobSet controls.
func (Integration) OwnerOf(ctx context.Context, get jobintegration.Getter, pod *corev1.Pod) (string, types.UID, error) {
	if pod.Labels[jobsetv1.JobSetNameKey] == "" {
		return "", "", nil
	}
	return jobintegration.OwnerVia(ctx, get, pod, batchv1.SchemeGroupVersion.WithKind("Job"), &batchv1.Job{}, gvk)
}

// JobSet adapts a JobSet.
type JobSet struct{ *jobsetv1.JobSet }

var (
	_ jobintegration.GenericJob      = (*JobSet)(nil)
	_ jobintegration.DefaultScoper   = (*JobSet)(nil)
	_ jobintegration.RestartBudgeter = (*JobSet)(nil)
)

// DefaultRestartBudget implements RestartBudgeter: nothing on the JobSet —
// each child Job is given the rule at its own creation (the Job
// integration), where the JobSet controller never changes it again.
func (j *JobSet) DefaultRestartBudget() []string { return nil }

// RestartBudgetWarnings implements RestartBudgeter: a replicated job whose
// Jobs a gang restart would cost their backoffLimit — restartPolicy
// OnFailure, JobSet's own default when the template sets none — fails, once
// its backoffLimit is spent, and so restarts the JobSet (failurePolicy).
func (j *JobSet) RestartBudgetWarnings() []string {
	var out []string
	for i := range j.Spec.ReplicatedJobs {
		rj := &j.Spec.ReplicatedJobs[i]
		for _, w := range job.RestartBudgetWarnings("replicated job "+rj.Name, rj.Template.Annotations, &rj.Template.Spec) {
			out = append(out, w+"; a child Job that fails restarts the JobSet (failurePolicy.maxRestarts)")
		}
	}
	return out
}

// Object implements GenericJob.
func (j *JobSet) Object() client.Object { return j.JobSet }

// GVK implements GenericJob.
func (j *JobSet) GVK() schema.GroupVersionKind { return gvk }

// Roles implements GenericJob: one role per replicated job, replicas ×
// parallelism pods at once.
func (j *JobSet) Roles() []jobintegration.Role {
	roles := make([]jobintegration.Role, 0, len(j.Spec.ReplicatedJobs))
	for i := range j.Spec.ReplicatedJobs {
		rj := &j.Spec.ReplicatedJobs[i]
		roles = append(roles, jobintegration.Role{
			Name: rj.Name, Template: &rj.Template.Spec.Template, Count: replicas(rj) * parallelism(&rj.Template.Spec),
			Path: field.NewPath("spec", "replicatedJobs").Key(rj.Name).Child("template", "spec", "template"),
		})
	}
	return roles
}

func replicas(rj *jobsetv1.ReplicatedJob) int32 {
	if rj.Replicas == 0 {
		return 1 // the CRD's default
	}
	return rj.Replicas
}

func parallelism(s *batchv1.JobSpec) int32 {
	if s.Parallelism == nil {
		return 1
	}
	return *s.Parallelism
}

// RoleOf implements GenericJob: the replicated job the JobSet controller
// labels its pods with.
func (j *JobSet) RoleOf(pod *corev1.Pod) string { return pod.Labels[jobsetv1.ReplicatedJobNameKey] }

// ordered reports whether the JobSet starts its replicated jobs one after
// another, and how.
func (j *JobSet) ordered() (string, bool) {
	if sp := j.Spec.StartupPolicy; sp != nil && sp.StartupPolicyOrder == jobsetv1.InOrder {
		return "startupPolicy InOrder", true
	}
	for _, rj := range j.Spec.ReplicatedJobs {
		if len(rj.DependsOn) > 0 {
			return fmt.Sprintf("replicated job %s dependsOn %s", rj.Name, rj.DependsOn[0].Name), true
		}
	}
	return "", false
}

// DefaultScope implements DefaultScoper: role when the replicated jobs start in order: a gang
// over jobs that wait for each other could never be placed.
func (j *JobSet) DefaultScope() string {
	if _, ok := j.ordered(); ok {
		return jobintegration.ScopeRole
	}
	return jobintegration.ScopeJob
}

// Qualify implements GenericJob: every replicated job's pods target
// Lockstep or none do; each child Job runs all its pods at once
// (completions equal to parallelism); no template names another group;
// one gang over replicated jobs that start in order is refused.
func (j *JobSet) Qualify() *jobintegration.NotQualified {
	rjs := j.Spec.ReplicatedJobs
	if len(rjs) == 0 {
		return &jobintegration.NotQualified{Condition: "it has no replicated jobs", Fix: "add spec.replicatedJobs"}
	}
	first := rjs[0].Template.Spec.Template.Spec.SchedulerName
	scope := jobintegration.Scope(j)
	for i := range rjs {
		rj := &rjs[i]
		spec := &rj.Template.Spec
		if s := spec.Template.Spec.SchedulerName; s != first {
			return &jobintegration.NotQualified{
				Condition: fmt.Sprintf("replicated job %s's pods name scheduler %q, replicated job %s's %q", rj.Name, s, rjs[0].Name, first),
				Fix:       "set schedulerName: " + lockv1.SchedulerName + " on every replicated job's pod template",
			}
		}
		if p := parallelism(spec); spec.Completions != nil && *spec.Completions != p {
			return &jobintegration.NotQualified{
				Condition: fmt.Sprintf("replicated job %s: completions (%d) differs from parallelism (%d)", rj.Name, *spec.Completions, p),
				Fix:       fmt.Sprintf("set completions: %d so all its pods run at once", p),
			}
		}
		own := j.Name
		if scope == jobintegration.ScopeRole && len(rjs) > 1 {
			own = j.Name + "-" + rj.Name
		}
		if jobintegration.HasGroup(&spec.Template, own) {
			return jobintegration.GroupNamed("the pod template of replicated job "+rj.Name, &spec.Template)
		}
	}
	if how, ok := j.ordered(); ok && scope == jobintegration.ScopeJob && len(rjs) > 1 {
		return &jobintegration.NotQualified{
			Condition: "one gang over replicated jobs that start one after another (" + how + ") could never be placed",
			Fix:       "remove the " + jobintegration.GangScopeAnnotation + " annotation (each replicated job is then a gang of its own) or start the replicated jobs together",
		}
	}
	return nil
}

// Stopped implements GenericJob.
func (j *JobSet) Stopped() (string, bool, bool) {
	return jobintegration.StoppedBy(ptr.Deref(j.Spec.Suspend, false), j.Status.Conditions,
		func(c *metav1.Condition) jobintegration.Condition {
			return jobintegration.Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason}
		},
		[]string{string(jobsetv1.JobSetCompleted)}, []string{string(jobsetv1.JobSetFailed)})
}
