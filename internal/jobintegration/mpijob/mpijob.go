// Package mpijob is the MPIJob (kubeflow.org/v2beta1, the MPI operator's)
// integration: a launcher — a batch/v1 Job the operator creates — and
// workers, pods the operator creates itself.
//
// An MPIJob is one gang named after it. With launcherCreationPolicy
// AtStartup (the default) the launcher is created with the workers and is
// in the gang (minCount workers + 1): it is placed only together with every
// worker, so it never holds a node while the workers wait. With
// WaitForWorkersReady the operator creates the launcher only once every
// worker is ready, so the gang is the workers alone (minCount workers) and
// the launcher is scheduled by itself afterwards — counting it, as the
// operator's own PodGroups do (minMember workers + 1), is the launcher
// deadlock of kubeflow/mpi-operator#608: the workers wait for a launcher
// that waits for them. spec.runPolicy.schedulingPolicy.minAvailable, when
// set, is the minCount (at most the gang's size); below the size of a gang
// with its launcher, the MPIJob is a scheduling tree instead — a root
// CompositePodGroup named after it needing both children, the launcher's
// PodGroup (<job>-launcher) in full and the workers' (<job>-worker) at
// minAvailable less the launcher — so the launcher is never left out.
package mpijob

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kubeflow"
)

// Integration is the MPIJob integration.
type Integration struct{}

var (
	_ jobintegration.Integration         = Integration{}
	_ jobintegration.PodAdmissionMatcher = Integration{}
)

var gvk = mpiv2.SchemeGroupVersionKind

// The roles, as the operator labels its pods (training.kubeflow.org/job-role).
const (
	roleLauncher = "launcher"
	roleWorker   = "worker"
)

// Name implements Integration.
func (Integration) Name() string { return "kubeflow.org/mpijob" }

// GVK implements Integration.
func (Integration) GVK() schema.GroupVersionKind { return gvk }

// Resource implements Integration.
func (Integration) Resource() string { return "mpijobs" }

// Aliases implements Integration.
func (Integration) Aliases() []string { return []string{"mpijob", "mpijobs"} }

// NewObject implements Integration.
func (Integration) NewObject() client.Object { return &mpiv2.MPIJob{} }

// Wrap implements Integration.
func (Integration) Wrap(o client.Object) jobintegration.GenericJob { return &MPIJob{o.(*mpiv2.MPIJob)} }

// AddToScheme implements Integration.
func (Integration) AddToScheme(s *runtime.Scheme) error { return mpiv2.AddToScheme(s) }

// AdmissionMatch implements Integration: the workers' pods target Lockstep.
func (Integration) AdmissionMatch() string {
	return `has(object.spec.mpiReplicaSpecs) && "Worker" in object.spec.mpiReplicaSpecs && has(object.spec.mpiReplicaSpecs.Worker.template.spec) && has(object.spec.mpiReplicaSpecs.Worker.template.spec.schedulerName) && object.spec.mpiReplicaSpecs.Worker.template.spec.schedulerName == "` + lockv1.SchedulerName + `"`
}

// PodAdmissionMatch implements PodAdmissionMatcher: the workers, which the operator creates itself (the
// launcher's pod is a Job's, which the pod webhook already takes).
func (Integration) PodAdmissionMatch() string { return jobintegration.ControlledByMatch(gvk) }

// OwnerOf implements Integration: a worker is controlled by the MPIJob, the
// launcher's pod by the launcher Job, which the MPIJob controls.
func (Integration) OwnerOf(ctx context.Context, get jobintegration.Getter, pod *corev1.Pod) (string, types.UID, error) {
	if ref, ok := jobintegration.ControllerOf(pod, gvk); ok {
		return ref.Name, ref.UID, nil
	}
	if pod.Labels[mpiv2.JobRoleLabel] != roleLauncher {
		return "", "", nil
	}
	return jobintegration.OwnerVia(ctx, get, pod, batchv1.SchemeGroupVersion.WithKind("Job"), &batchv1.Job{}, gvk)
}

// MPIJob adapts an MPIJob.
type MPIJob struct{ *mpiv2.MPIJob }

var (
	_ jobintegration.GenericJob      = (*MPIJob)(nil)
	_ jobintegration.RestartBudgeter = (*MPIJob)(nil)
	_ jobintegration.MinCounter      = (*MPIJob)(nil)
	_ jobintegration.RoleMinCounter  = (*MPIJob)(nil)
	_ jobintegration.FieldValidator  = (*MPIJob)(nil)
	_ jobintegration.Warner          = (*MPIJob)(nil)
)

// Object implements GenericJob.
func (m *MPIJob) Object() client.Object { return m.MPIJob }

// GVK implements GenericJob.
func (m *MPIJob) GVK() schema.GroupVersionKind { return gvk }

// launcherLater reports whether the operator creates the launcher only
// once the workers are ready.
func (m *MPIJob) launcherLater() bool {
	return m.Spec.LauncherCreationPolicy == mpiv2.LauncherCreationPolicyWaitForWorkersReady
}

// Roles implements GenericJob: the launcher (Solo when it comes after the
// workers) and the workers.
func (m *MPIJob) Roles() []jobintegration.Role {
	path := field.NewPath("spec", "mpiReplicaSpecs")
	var roles []jobintegration.Role
	if s := m.Spec.MPIReplicaSpecs[mpiv2.MPIReplicaTypeLauncher]; s != nil {
		roles = append(roles, jobintegration.Role{Name: roleLauncher, Template: &s.Template, Count: replicas(s, 1), Path: path.Key(string(mpiv2.MPIReplicaTypeLauncher)).Child("template"), Solo: m.launcherLater()})
	}
	if s := m.Spec.MPIReplicaSpecs[mpiv2.MPIReplicaTypeWorker]; s != nil {
		roles = append(roles, jobintegration.Role{Name: roleWorker, Template: &s.Template, Count: replicas(s, 0), Path: path.Key(string(mpiv2.MPIReplicaTypeWorker)).Child("template")})
	}
	return roles
}

// replicas is the spec's count, or the operator's default for it.
func replicas(s *mpiv2.ReplicaSpec, def int32) int32 {
	if s.Replicas == nil {
		return def
	}
	return *s.Replicas
}

// RoleOf implements GenericJob.
func (m *MPIJob) RoleOf(pod *corev1.Pod) string { return pod.Labels[mpiv2.JobRoleLabel] }

func (m *MPIJob) policy() *kubeflow.SchedulingPolicy {
	sp := m.Spec.RunPolicy.SchedulingPolicy
	if sp == nil {
		return nil
	}
	return &kubeflow.SchedulingPolicy{MinAvailable: sp.MinAvailable, Queue: sp.Queue, MinResources: sp.MinResources != nil, PriorityClass: sp.PriorityClass, ScheduleTimeoutSeconds: sp.ScheduleTimeoutSeconds}
}

// RoleMinCounts implements RoleMinCounter: a launcher created with the
// workers and a schedulingPolicy.minAvailable below the gang's size make a
// tree — the launcher in full and the workers at minAvailable less the
// launcher — so the launcher is never left out of "any minAvailable pods";
// otherwise (every pod required, or the launcher scheduled alone) one flat
// gang.
func (m *MPIJob) RoleMinCounts() (map[string]int32, bool) {
	sp := m.Spec.RunPolicy.SchedulingPolicy
	roles := m.Roles()
	if sp == nil || sp.MinAvailable == nil || m.launcherLater() || len(roles) != 2 || *sp.MinAvailable >= jobintegration.Size(m) {
		return nil, false
	}
	launcher := roles[0].Count
	if *sp.MinAvailable < launcher {
		return nil, false
	}
	return map[string]int32{roleLauncher: launcher, roleWorker: *sp.MinAvailable - launcher}, true
}

// KindMinCount implements MinCounter: schedulingPolicy.minAvailable.
func (m *MPIJob) KindMinCount() (int32, bool) {
	if sp := m.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.MinAvailable != nil {
		return *sp.MinAvailable, true
	}
	return 0, false
}

// ValidateFields implements FieldValidator: the scheduling policy, and a
// minAvailable that counts a launcher created only after the workers (the
// launcher deadlock) is refused with the reason.
func (m *MPIJob) ValidateFields() field.ErrorList {
	if sp := m.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.MinAvailable != nil && m.launcherLater() && *sp.MinAvailable > jobintegration.Size(m) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "runPolicy", "schedulingPolicy", "minAvailable"), *sp.MinAvailable,
			fmt.Sprintf("with launcherCreationPolicy WaitForWorkersReady the launcher is created only once the workers run, so a gang of more than the %d workers would wait for it forever: set minAvailable to at most %d, or remove it", jobintegration.Size(m), jobintegration.Size(m)))}
	}
	return kubeflow.ValidatePolicy(m, m.policy())
}

// Warnings implements Warner.
func (m *MPIJob) Warnings() []string { return kubeflow.PolicyWarnings(m, m.policy()) }

// DefaultRestartBudget implements RestartBudgeter: the operator recreates a
// deleted worker at once and counts nothing; the launcher runs as a Job,
// given the rule at that Job's own creation when it restarts Never.
func (m *MPIJob) DefaultRestartBudget() []string { return nil }

// RestartBudgetWarnings implements RestartBudgeter: a launcher restarting
// OnFailure (the operator's default) runs as a Job that can carry no
// podFailurePolicy, so each gang restart that deletes the launcher pod
// counts against runPolicy.backoffLimit (which the operator copies to it).
func (m *MPIJob) RestartBudgetWarnings() []string {
	s := m.Spec.MPIReplicaSpecs[mpiv2.MPIReplicaTypeLauncher]
	if s == nil || s.RestartPolicy == mpiv2.RestartPolicyNever || s.RestartPolicy == mpiv2.RestartPolicyExitCode {
		return nil
	}
	policy := s.RestartPolicy
	if policy == "" {
		policy = mpiv2.RestartPolicyOnFailure
	}
	return []string{fmt.Sprintf("the launcher has restartPolicy %s: its Job can carry no podFailurePolicy, so each gang restart or preemption that deletes the launcher pod counts against spec.runPolicy.backoffLimit, and the MPIJob fails once it is spent; set the launcher's restartPolicy: Never (or ExitCode) and Lockstep gives its Job the rule that ignores disruptions (docs/integrations.md)", policy)}
}

// Qualify implements GenericJob: launcher and workers target the same
// scheduler, there are workers, and no template names another group.
func (m *MPIJob) Qualify() *jobintegration.NotQualified {
	roles := m.Roles()
	var workers *jobintegration.Role
	for i := range roles {
		if roles[i].Name == roleWorker {
			workers = &roles[i]
		}
	}
	if workers == nil || workers.Count == 0 {
		return &jobintegration.NotQualified{Condition: "it has no workers", Fix: "set spec.mpiReplicaSpecs.Worker.replicas"}
	}
	for _, r := range roles {
		if s, w := r.Template.Spec.SchedulerName, workers.Template.Spec.SchedulerName; s != w {
			return &jobintegration.NotQualified{
				Condition: fmt.Sprintf("the %s pods name scheduler %q, the workers %q", r.Name, s, w),
				Fix:       "set schedulerName: " + lockv1.SchedulerName + " on the launcher's and the workers' pod templates",
			}
		}
		if jobintegration.HasRoleGroup(r.Template, m.Name, r.Name) {
			return jobintegration.GroupNamed("the "+r.Name+" pod template", r.Template)
		}
	}
	return nil
}

// Stopped implements GenericJob.
func (m *MPIJob) Stopped() (string, bool, bool) {
	return jobintegration.StoppedBy(ptr.Deref(m.Spec.RunPolicy.Suspend, false), m.Status.Conditions,
		func(c *mpiv2.JobCondition) jobintegration.Condition {
			return jobintegration.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason}
		},
		[]string{string(mpiv2.JobSucceeded)}, []string{string(mpiv2.JobFailed)})
}
