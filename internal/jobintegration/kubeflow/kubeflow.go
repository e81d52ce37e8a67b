// Package kubeflow is the integration of the Kubeflow training operator's
// (v1) jobs: PyTorchJob, TFJob, XGBoostJob and PaddleJob (kubeflow.org/v1).
// They share one shape — replica specs by type (Master, Worker, PS, …) and
// a run policy — and the operator creates their pods itself, controlled by
// the job and labelled with their replica type.
//
// A job is one gang of every replica (a distributed job needs every rank),
// named after the job, its minCount the job's size. When its workers may
// run below their replicas — spec.runPolicy.schedulingPolicy.minAvailable
// (which the operator gives Volcano and the coscheduling plugin) below the
// size, or an elastic PyTorchJob's or PaddleJob's minReplicas below its
// maxReplicas — and other replicas (a master) run beside them, the job is
// a scheduling tree: a root CompositePodGroup named after the job needing
// every child, one PodGroup per replica type (<job>-<type>), the other
// replicas in full and the workers at their minimum (minAvailable less the
// other replicas, or minReplicas), so the master is never left out. A job
// of workers alone stays one flat gang of that minimum.
package kubeflow

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kfv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// Kind is one of the training operator's job kinds.
type Kind struct {
	kind, resource string
	// specsField is the JSON name of the kind's replica specs.
	specsField string
	aliases    []string
	newObject  func() client.Object
	// parts reads a job of the kind.
	parts func(client.Object) parts
}

// parts are the fields every kind has, and the elastic minimum of those
// that scale their workers.
type parts struct {
	specs      map[kfv1.ReplicaType]*kfv1.ReplicaSpec
	run        *kfv1.RunPolicy
	status     *kfv1.JobStatus
	elasticMin *int32
	elasticMax *int32
}

// The kinds.
var (
	PyTorchJob = &Kind{
		kind: kfv1.PyTorchJobKind, resource: kfv1.PyTorchJobPlural, specsField: "pytorchReplicaSpecs",
		aliases:   []string{"pytorchjob", "pytorchjobs"},
		newObject: func() client.Object { return &kfv1.PyTorchJob{} },
		parts: func(o client.Object) parts {
			j := o.(*kfv1.PyTorchJob)
			p := parts{specs: j.Spec.PyTorchReplicaSpecs, run: &j.Spec.RunPolicy, status: &j.Status}
			if e := j.Spec.ElasticPolicy; e != nil {
				p.elasticMin, p.elasticMax = e.MinReplicas, e.MaxReplicas
			}
			return p
		},
	}
	TFJob = &Kind{
		kind: kfv1.TFJobKind, resource: kfv1.TFJobPlural, specsField: "tfReplicaSpecs",
		aliases:   []string{"tfjob", "tfjobs"},
		newObject: func() client.Object { return &kfv1.TFJob{} },
		parts: func(o client.Object) parts {
			j := o.(*kfv1.TFJob)
			return parts{specs: j.Spec.TFReplicaSpecs, run: &j.Spec.RunPolicy, status: &j.Status}
		},
	}
	XGBoostJob = &Kind{
		kind: kfv1.XGBoostJobKind, resource: kfv1.XGBoostJobPlural, specsField: "xgbReplicaSpecs",
		aliases:   []string{"xgboostjob", "xgboostjobs"},
		newObject: func() client.Object { return &kfv1.XGBoostJob{} },
		parts: func(o client.Object) parts {
			j := o.(*kfv1.XGBoostJob)
			return parts{specs: j.Spec.XGBReplicaSpecs, run: &j.Spec.RunPolicy, status: &j.Status}
		},
	}
	PaddleJob = &Kind{
		kind: kfv1.PaddleJobKind, resource: kfv1.PaddleJobPlural, specsField: "paddleReplicaSpecs",
		aliases:   []string{"paddlejob", "paddlejobs"},
		newObject: func() client.Object { return &kfv1.PaddleJob{} },
		parts: func(o client.Object) parts {
			j := o.(*kfv1.PaddleJob)
			p := parts{specs: j.Spec.PaddleReplicaSpecs, run: &j.Spec.RunPolicy, status: &j.Status}
			if e := j.Spec.ElasticPolicy; e != nil {
				p.elasticMin, p.elasticMax = e.MinReplicas, e.MaxReplicas
			}
			return p
		},
	}
)

var (
	_ jobintegration.Integration         = PyTorchJob
	_ jobintegration.PodAdmissionMatcher = PyTorchJob
)

// Name implements Integration.
func (k *Kind) Name() string { return "kubeflow.org/" + strings.ToLower(k.kind) }

// GVK implements Integration.
func (k *Kind) GVK() schema.GroupVersionKind { return kfv1.GroupVersion.WithKind(k.kind) }

// Resource implements Integration.
func (k *Kind) Resource() string { return k.resource }

// Aliases implements Integration.
func (k *Kind) Aliases() []string { return k.aliases }

// NewObject implements Integration.
func (k *Kind) NewObject() client.Object { return k.newObject() }

// AddToScheme implements Integration: the operator's group, every kind.
func (k *Kind) AddToScheme(s *runtime.Scheme) error { return kfv1.AddToScheme(s) }

// AdmissionMatch implements Integration: any replica's pods target
// Lockstep (Qualify refuses a job whose replicas disagree).
func (k *Kind) AdmissionMatch() string {
	specs := "object.spec." + k.specsField
	return `has(` + specs + `) && ` + specs + `.exists(t, has(` + specs + `[t].template.spec) && has(` + specs + `[t].template.spec.schedulerName) && ` +
		specs + `[t].template.spec.schedulerName == "` + lockv1.SchedulerName + `")`
}

// PodAdmissionMatch implements PodAdmissionMatcher: the job's pods, which the operator creates itself.
func (k *Kind) PodAdmissionMatch() string { return jobintegration.ControlledByMatch(k.GVK()) }

// OwnerOf implements Integration: the operator creates the pods, controlled
// by the job.
func (k *Kind) OwnerOf(_ context.Context, _ jobintegration.Getter, pod *corev1.Pod) (string, types.UID, error) {
	if ref, ok := jobintegration.ControllerOf(pod, k.GVK()); ok {
		return ref.Name, ref.UID, nil
	}
	return "", "", nil
}

// Wrap implements Integration.
func (k *Kind) Wrap(o client.Object) jobintegration.GenericJob {
	return &Job{kind: k, obj: o, parts: k.parts(o)}
}

// Job adapts a training job of any of the kinds.
type Job struct {
	kind *Kind
	obj  client.Object
	parts
}

var (
	_ jobintegration.GenericJob      = (*Job)(nil)
	_ jobintegration.MinCounter      = (*Job)(nil)
	_ jobintegration.RoleMinCounter  = (*Job)(nil)
	_ jobintegration.FieldValidator  = (*Job)(nil)
	_ jobintegration.Warner          = (*Job)(nil)
	_ jobintegration.RestartBudgeter = (*Job)(nil)
)

// Object implements GenericJob.
func (j *Job) Object() client.Object { return j.obj }

// GVK implements GenericJob.
func (j *Job) GVK() schema.GroupVersionKind { return j.kind.GVK() }

// types are the job's replica types, the coordinating ones (Master, Chief,
// Launcher) first, then by name.
func (j *Job) types() []kfv1.ReplicaType {
	ts := make([]kfv1.ReplicaType, 0, len(j.specs))
	for t, s := range j.specs {
		if s != nil {
			ts = append(ts, t)
		}
	}
	rank := func(t kfv1.ReplicaType) int {
		switch strings.ToLower(string(t)) {
		case "master", "chief", "launcher":
			return 0
		}
		return 1
	}
	slices.SortFunc(ts, func(a, b kfv1.ReplicaType) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(string(a), string(b))
	})
	return ts
}

// Roles implements GenericJob: one role per replica type, named as the
// operator labels the pods (lower case), replicas pods each.
func (j *Job) Roles() []jobintegration.Role {
	path := field.NewPath("spec", j.kind.specsField)
	roles := make([]jobintegration.Role, 0, len(j.specs))
	for _, t := range j.types() {
		s := j.specs[t]
		roles = append(roles, jobintegration.Role{Name: strings.ToLower(string(t)), Template: &s.Template, Count: replicas(s), Path: path.Key(string(t)).Child("template")})
	}
	return roles
}

func replicas(s *kfv1.ReplicaSpec) int32 {
	if s.Replicas == nil {
		return 1 // the operator's default
	}
	return *s.Replicas
}

// RoleOf implements GenericJob.
func (j *Job) RoleOf(pod *corev1.Pod) string { return pod.Labels[kfv1.ReplicaTypeLabel] }

// KindMinCount implements MinCounter: schedulingPolicy.minAvailable, else
// the elastic minimum of workers beside every other replica.
func (j *Job) KindMinCount() (int32, bool) {
	if sp := j.run.SchedulingPolicy; sp != nil && sp.MinAvailable != nil {
		return *sp.MinAvailable, true
	}
	if j.elasticMin == nil {
		return 0, false
	}
	var n int32
	for _, r := range j.Roles() {
		if r.Name == "worker" {
			n += min(*j.elasticMin, r.Count)
		} else {
			n += r.Count
		}
	}
	return n, true
}

// RoleMinCounts implements RoleMinCounter: when the job's workers may run
// below their replicas — an elastic policy whose minReplicas is below its
// maxReplicas (or has none), or a schedulingPolicy.minAvailable below the
// job's size that still covers every other replica — every other replica
// (master, chief, PS) is required in full beside the workers' minimum, a
// tree; otherwise (every pod required, or no coordinator beside the
// workers) one flat gang.
func (j *Job) RoleMinCounts() (map[string]int32, bool) {
	roles := j.Roles()
	mins, others := map[string]int32{}, int32(0)
	var workers *jobintegration.Role
	for i, r := range roles {
		mins[r.Name] = r.Count
		if r.Name == "worker" {
			workers = &roles[i]
		} else {
			others += r.Count
		}
	}
	if workers == nil || len(roles) < 2 {
		return nil, false
	}
	if sp := j.run.SchedulingPolicy; sp != nil && sp.MinAvailable != nil {
		wm := *sp.MinAvailable - others
		if wm < 0 || wm >= workers.Count {
			return nil, false
		}
		mins["worker"] = wm
		return mins, true
	}
	if j.elasticMin == nil || j.elasticMax != nil && *j.elasticMin >= *j.elasticMax {
		return nil, false
	}
	mins["worker"] = min(*j.elasticMin, workers.Count)
	return mins, true
}

// ValidateFields implements FieldValidator.
func (j *Job) ValidateFields() field.ErrorList {
	return ValidatePolicy(j, policyOf(j.run.SchedulingPolicy))
}

// Warnings implements Warner.
func (j *Job) Warnings() []string { return PolicyWarnings(j, policyOf(j.run.SchedulingPolicy)) }

// DefaultRestartBudget implements RestartBudgeter: the training operator
// recreates a deleted pod of a replica that restarts OnFailure, Always or
// ExitCode at once, counting nothing against runPolicy.backoffLimit (which
// counts container restarts of running pods); nothing to change.
func (j *Job) DefaultRestartBudget() []string { return nil }

// RestartBudgetWarnings implements RestartBudgeter: a replica whose
// restartPolicy is Never is the one a gang restart costs — the training
// operator counts a deleted pod of it as failed and fails the whole job.
func (j *Job) RestartBudgetWarnings() []string {
	var out []string
	for _, t := range j.types() {
		if j.specs[t].RestartPolicy == kfv1.RestartPolicyNever {
			out = append(out, fmt.Sprintf("replica %s has restartPolicy Never: the operator fails the %s when a pod of it is deleted, so a gang restart or preemption fails the job instead of running it again; use restartPolicy OnFailure or ExitCode (a rank stopped by SIGTERM exits 143, which ExitCode retries) (docs/integrations.md)", t, j.kind.kind))
		}
	}
	return out
}

func policyOf(sp *kfv1.SchedulingPolicy) *SchedulingPolicy {
	if sp == nil {
		return nil
	}
	return &SchedulingPolicy{MinAvailable: sp.MinAvailable, Queue: sp.Queue, MinResources: sp.MinResources != nil, PriorityClass: sp.PriorityClass, ScheduleTimeoutSeconds: sp.ScheduleTimeoutSeconds}
}

// SchedulingPolicy is the gang scheduling policy the Kubeflow operators'
// jobs carry in spec.runPolicy.schedulingPolicy (the training operator's
// and the MPI operator's types differ only in package), for Volcano and
// the coscheduling plugin.
type SchedulingPolicy struct {
	MinAvailable           *int32
	Queue                  string
	MinResources           bool
	PriorityClass          string
	ScheduleTimeoutSeconds *int32
}

// ValidatePolicy refuses a minAvailable outside the job's gang and a policy
// priority class its pods do not have (a gang's priority is its pods',
// which admission checks; a group priority of its own would lend them one).
func ValidatePolicy(j jobintegration.GenericJob, sp *SchedulingPolicy) field.ErrorList {
	if sp == nil {
		return nil
	}
	path := field.NewPath("spec", "runPolicy", "schedulingPolicy")
	var errs field.ErrorList
	if size := jobintegration.Size(j); sp.MinAvailable != nil && (*sp.MinAvailable < 1 || *sp.MinAvailable > size) {
		errs = append(errs, field.Invalid(path.Child("minAvailable"), *sp.MinAvailable, fmt.Sprintf("must be between 1 and the %d pods of the job's gang: the gang could never start", size)))
	} else if others, names := coordinators(j); sp.MinAvailable != nil && others > 0 && *sp.MinAvailable < others {
		errs = append(errs, field.Invalid(path.Child("minAvailable"), *sp.MinAvailable, fmt.Sprintf("is below the job's %d replicas beside its workers (%s): a gang of any %d pods could start without them, which Lockstep never does; set minAvailable to at least %d — those replicas plus the workers the job needs", others, strings.Join(names, ", "), *sp.MinAvailable, others+1)))
	}
	if sp.PriorityClass != "" {
		for _, r := range j.Roles() {
			if pc := r.Template.Spec.PriorityClassName; pc != sp.PriorityClass {
				errs = append(errs, field.Invalid(path.Child("priorityClass"), sp.PriorityClass,
					fmt.Sprintf("the %s pods' priorityClassName is %q: Lockstep gives a gang its pods' priority; set priorityClassName: %s on every replica template, or remove schedulingPolicy.priorityClass", r.Name, pc, sp.PriorityClass)))
				break
			}
		}
	}
	return errs
}

// coordinators counts the pods of the job's gang beside its workers (a
// master, chief, PS, launcher) and names them, none when it has no
// workers.
func coordinators(j jobintegration.GenericJob) (int32, []string) {
	var n int32
	var names []string
	workers := false
	for _, r := range j.Roles() {
		switch {
		case r.Solo:
		case r.Name == "worker":
			workers = true
		default:
			n += r.Count
			names = append(names, fmt.Sprintf("%s: %d", r.Name, r.Count))
		}
	}
	if !workers {
		return 0, nil
	}
	return n, names
}

// PolicyWarnings names the policy fields Volcano and the coscheduling
// plugin read that Lockstep does not, so none is silently ignored.
func PolicyWarnings(j jobintegration.GenericJob, sp *SchedulingPolicy) []string {
	if sp == nil || !jobintegration.TargetsLockstep(j) {
		return nil
	}
	var out []string
	if sp.Queue != "" {
		out = append(out, "spec.runPolicy.schedulingPolicy.queue is a Volcano queue and has no effect on Lockstep; to queue the job behind quota, use Kueue (label kueue.x-k8s.io/queue-name)")
	}
	if sp.MinResources {
		out = append(out, "spec.runPolicy.schedulingPolicy.minResources has no effect on Lockstep: a gang's resources are its pods' requests")
	}
	if sp.ScheduleTimeoutSeconds != nil {
		out = append(out, "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds has no effect on Lockstep: a gang waits whole until it fits (spec.runPolicy.activeDeadlineSeconds bounds the job)")
	}
	return out
}

// Qualify implements GenericJob: every replica's pods target the same
// scheduler, and no template names another group.
func (j *Job) Qualify() *jobintegration.NotQualified {
	roles := j.Roles()
	if len(roles) == 0 {
		return &jobintegration.NotQualified{Condition: "it has no replica specs", Fix: "add spec." + j.kind.specsField}
	}
	first := roles[0].Template.Spec.SchedulerName
	for _, r := range roles {
		if s := r.Template.Spec.SchedulerName; s != first {
			return &jobintegration.NotQualified{
				Condition: fmt.Sprintf("the %s pods name scheduler %q, the %s pods %q", r.Name, s, roles[0].Name, first),
				Fix:       "set schedulerName: " + lockv1.SchedulerName + " on every replica's pod template",
			}
		}
		if jobintegration.HasRoleGroup(r.Template, j.obj.GetName(), r.Name) {
			return jobintegration.GroupNamed("the "+r.Name+" pod template", r.Template)
		}
	}
	return nil
}

// Stopped implements GenericJob. (An elastic job's workers come and go by
// replica count: it is no IndexedJob.)
func (j *Job) Stopped() (string, bool, bool) {
	return jobintegration.StoppedBy(ptr.Deref(j.run.Suspend, false), j.status.Conditions, ReadCondition,
		[]string{string(kfv1.JobSucceeded)}, []string{string(kfv1.JobFailed)})
}

// ReadCondition reads a Kubeflow job condition for StoppedBy.
func ReadCondition(c *kfv1.JobCondition) jobintegration.Condition {
	return jobintegration.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason}
}
