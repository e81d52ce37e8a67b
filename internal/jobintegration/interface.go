package jobintegration

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Annotations a user may put on a job.
const (
	// MinCountAnnotation lowers the gang's minCount below the job's size.
	MinCountAnnotation = "scheduling.lockstep.dev/min-count"
	// DisruptionModeAnnotation: "single" lets members be disrupted one by
	// one; the default is "all".
	DisruptionModeAnnotation = "scheduling.lockstep.dev/disruption-mode"
)

// GenericJob is what the reconciler needs to know about one job object.
type GenericJob interface {
	// Object is the job itself (owner of the Workload and PodGroup).
	Object() client.Object
	// GVK of the job, for owner references.
	GVK() schema.GroupVersionKind
	// PodTemplate is the template of the job's pods.
	PodTemplate() *corev1.PodTemplateSpec
	// Size is how many pods run at once when the job runs whole.
	Size() int32
	// Qualify returns nil when the job has the fixed shape of a gang, else
	// which condition failed and how to fix it.
	Qualify() *NotQualified
	// InTreeGang reports whether the job carries its own gang policy for the
	// API server's scheduling.k8s.io PodGroup (upstream WorkloadWithJob); then
	// Lockstep creates no second group.
	InTreeGang() bool
	// Stopped says why the job no longer wants its pods running
	// ("suspended", "complete", "failed: <reason>"), "" while it does;
	// failed and suspended tell those cases apart.
	Stopped() (why string, failed, suspended bool)
	// Wants reports whether the member with this index is still part of the
	// job: false once a scale-down removed the index.
	Wants(index int32) bool
}

// Integration registers one kind of job.
type Integration interface {
	// Name is e.g. "batch/job".
	Name() string
	// GVK is the kind's group, version and kind, as owner references name it.
	GVK() schema.GroupVersionKind
	// NewObject returns an empty object of the kind, for watches and Gets.
	NewObject() client.Object
	// Wrap adapts an object of the kind.
	Wrap(client.Object) GenericJob
}

// NotQualified says why a job is not a gang and how to make it one.
type NotQualified struct {
	Condition string
	Fix       string
}

func (n *NotQualified) Error() string { return n.Condition + "; " + n.Fix }

// TargetsLockstep reports whether the job's pods are scheduled by Lockstep.
func TargetsLockstep(j GenericJob) bool {
	return j.PodTemplate().Spec.SchedulerName == lockv1.SchedulerName
}

// HasGroup reports whether the template already names a group other than
// own (the group Lockstep makes for the job, which its admission may have
// written into the template already).
func HasGroup(t *corev1.PodTemplateSpec, own string) bool {
	if g := t.Labels[lockv1.PodGroupLabel]; g != "" && g != own {
		return true
	}
	sg := t.Spec.SchedulingGroup
	return sg != nil && sg.PodGroupName != nil
}

// MinCount is the job's size unless the annotation lowers it; the error
// explains a bad annotation.
func MinCount(j GenericJob) (int32, error) {
	v, ok := j.Object().GetAnnotations()[MinCountAnnotation]
	if !ok {
		return j.Size(), nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, &NotQualified{Condition: MinCountAnnotation + "=" + strconv.Quote(v) + " is not a positive integer", Fix: "set it to the number of pods that must run together, or remove it"}
	}
	if int32(n) > j.Size() {
		return 0, &NotQualified{
			Condition: MinCountAnnotation + "=" + v + " is larger than the job can ever run (" + strconv.Itoa(int(j.Size())) + " pods at once)",
			Fix:       "lower the annotation to at most " + strconv.Itoa(int(j.Size())) + " or raise parallelism",
		}
	}
	return int32(n), nil
}

// DisruptionMode is all unless the annotation says single.
func DisruptionMode(j GenericJob) (*lockv1.DisruptionMode, error) {
	switch v := j.Object().GetAnnotations()[DisruptionModeAnnotation]; v {
	case "", "all":
		return &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}}, nil
	case "single":
		return &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}, nil
	default:
		return nil, &NotQualified{Condition: DisruptionModeAnnotation + "=" + strconv.Quote(v) + " is not a disruption mode", Fix: `use "all" (default) or "single"`}
	}
}
