package jobintegration

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	// GangScopeAnnotation: "job" (the default) makes one gang of every pod
	// of the job; "role" one gang per role (a JobSet's replicated job),
	// each independent of the others.
	GangScopeAnnotation = "scheduling.lockstep.dev/gang-scope"
)

// Gang scopes.
const (
	ScopeJob  = "job"
	ScopeRole = "role"
)

// Role is one kind of pod of a job: its template and how many of its pods
// run at once when the job runs whole.
type Role struct {
	// Name is the role's name (a JobSet's replicated job); a job with one
	// role calls it TemplateName.
	Name     string
	Template *corev1.PodTemplateSpec
	Count    int32
	// Path is the template's field path in the job, for errors.
	Path *field.Path
	// Solo: the role's pods join no group and are scheduled one by one
	// (an MPI launcher created only once its workers run: counting it in
	// their gang would deadlock it).
	Solo bool
}

// GenericJob is what the framework needs to know about one job object.
type GenericJob interface {
	// Object is the job itself (owner of the Workload and PodGroups).
	Object() client.Object
	// GVK of the job, for owner references.
	GVK() schema.GroupVersionKind
	// Roles are the job's pod templates. Their pointers may be written to
	// (admission writes each role's group into its template).
	Roles() []Role
	// RoleOf is the role of one of the job's pods ("" if none).
	RoleOf(pod *corev1.Pod) string
	// Qualify returns nil when the job has the shape of a gang, else which
	// condition failed and how to fix it.
	Qualify() *NotQualified
	// Stopped says why the job no longer wants its pods running
	// ("suspended", "complete", "failed: <reason>"), "" while it does;
	// failed and suspended tell those cases apart. Kinds that say so with a
	// suspend flag and status conditions answer with StoppedBy.
	Stopped() (why string, failed, suspended bool)
}

// Getter reads objects: a cache first, the API server on a miss.
type Getter interface {
	Get(ctx context.Context, key types.NamespacedName, obj client.Object) error
}

// Integration is one kind of job.
type Integration interface {
	// Name is e.g. "batch/job".
	Name() string
	// GVK is the kind's group, version and kind, as owner references name it.
	GVK() schema.GroupVersionKind
	// Resource is the kind's resource (plural) name, e.g. "jobs".
	Resource() string
	// Aliases are the names `lockstep explain` accepts for the kind.
	Aliases() []string
	// NewObject returns an empty object of the kind, for watches and Gets.
	NewObject() client.Object
	// Wrap adapts an object of the kind.
	Wrap(client.Object) GenericJob
	// AddToScheme registers the kind's types.
	AddToScheme(*runtime.Scheme) error
	// AdmissionMatch is a CEL expression over the admitted object that is
	// true when its pods target Lockstep: the match condition of its
	// webhooks, so other objects never reach them.
	AdmissionMatch() string
	// OwnerOf returns the job of this kind a pod belongs to — its name and
	// UID — or "" when the pod is not one of its pods. It follows the
	// pod's controller references (reading intermediate objects with get),
	// never labels alone, so a pod cannot claim a job it was not created
	// for.
	OwnerOf(ctx context.Context, get Getter, pod *corev1.Pod) (name string, uid types.UID, err error)
}

// Wrapped is implemented by an integration whose jobs other kinds create
// to run as, under their own name (Kubeflow Trainer v2's TrainJob runs as
// a JobSet of its name): `lockstep explain` resolves an object of such a
// kind to the job it runs as. The kind needs nothing else: its job's
// integration makes the gangs.
type Wrapped interface {
	WrappedBy() []Wrapper
}

// Wrapper is a kind whose objects run as a job of another integration,
// named after the object and controlled by it.
type Wrapper struct {
	GVK      schema.GroupVersionKind
	Resource string
	// Aliases are the names `lockstep explain` accepts for the kind.
	Aliases []string
}

// NotQualified says why a job is not a gang and how to make it one.
type NotQualified struct {
	Condition string
	Fix       string
	// Named is the group the job's pod template names, when that is why
	// Lockstep makes no gang of its own: its pods join that group.
	Named string
}

// GroupNamed is the NotQualified of a job whose pod template (what) names
// a group of its own choosing — the membership label, or
// spec.schedulingGroup (the API server's scheduling.k8s.io PodGroup that
// a workload controller creates, where it is served): its pods join that
// group, scheduled as it says, and Lockstep creates none of its own.
func GroupNamed(what string, t *corev1.PodTemplateSpec) *NotQualified {
	name := t.Labels[lockv1.PodGroupLabel]
	if sg := t.Spec.SchedulingGroup; name == "" && sg != nil && sg.PodGroupName != nil {
		name = *sg.PodGroupName
	}
	return &NotQualified{
		Condition: what + " names PodGroup " + name,
		Fix:       "its pods join that group as it says; remove the scheduling.lockstep.dev/pod-group label (or spec.schedulingGroup) to let Lockstep make the gang",
		Named:     name,
	}
}

func (n *NotQualified) Error() string { return n.Condition + "; " + n.Fix }

// TargetsLockstep reports whether the job's pods are scheduled by Lockstep:
// those of its first role (Qualify refuses a job whose roles disagree).
func TargetsLockstep(j GenericJob) bool {
	roles := j.Roles()
	return len(roles) > 0 && roles[0].Template.Spec.SchedulerName == lockv1.SchedulerName
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

// HasRoleGroup reports whether the template of one of job's roles names a
// group other than either the job's flat gang (named after the job) or
// the role's child of the job's tree (<job>-<role>): the two groups
// Lockstep makes for that role, which admission may have written into it.
func HasRoleGroup(t *corev1.PodTemplateSpec, job, role string) bool {
	return HasGroup(t, job) && HasGroup(t, job+"-"+role)
}

// Size is how many pods of the job's gang run at once when it runs whole
// (its Solo roles' pods are not in it).
func Size(j GenericJob) int32 {
	var n int32
	for _, r := range j.Roles() {
		if !r.Solo {
			n += r.Count
		}
	}
	return n
}

// MinCount is the job's size unless the annotation (or else its kind's
// own minimum, MinCounter) lowers it; the error (a *NotQualified) explains
// a bad annotation.
func MinCount(j GenericJob) (int32, error) {
	n, nq := minCount(j)
	if nq != nil {
		return 0, nq
	}
	return n, nil
}

func minCount(j GenericJob) (int32, *NotQualified) {
	v, ok := j.Object().GetAnnotations()[MinCountAnnotation]
	size := Size(j)
	if !ok {
		if mc, ok := j.(MinCounter); ok {
			if n, ok := mc.KindMinCount(); ok {
				if n < 1 || n > size {
					return 0, &NotQualified{Condition: fmt.Sprintf("its minimum of %d pods is not between 1 and its size (%d)", n, size), Fix: "lower the minimum, or raise the replicas"}
				}
				return n, nil
			}
		}
		return size, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, &NotQualified{Condition: MinCountAnnotation + "=" + strconv.Quote(v) + " is not a positive integer", Fix: "set it to the number of pods that must run together, or remove it"}
	}
	if int32(n) > size {
		return 0, &NotQualified{
			Condition: MinCountAnnotation + "=" + v + " is larger than the job can ever run (" + strconv.Itoa(int(size)) + " pods at once)",
			Fix:       "lower the annotation to at most " + strconv.Itoa(int(size)) + " or raise parallelism",
		}
	}
	if Scope(j) == ScopeRole && len(j.Roles()) > 1 {
		return 0, &NotQualified{Condition: MinCountAnnotation + " is set with " + GangScopeAnnotation + "=role", Fix: "each role's gang needs all its pods; remove the annotation, or use one gang for the job"}
	}
	return int32(n), nil
}

// DisruptionMode is the annotation's, else the kind's default
// (DisruptionDefaulter), else all; the error (a *NotQualified) explains a
// bad annotation.
func DisruptionMode(j GenericJob) (*lockv1.DisruptionMode, error) {
	m, nq := disruptionMode(j)
	if nq != nil {
		return nil, nq
	}
	return m, nil
}

func disruptionMode(j GenericJob) (*lockv1.DisruptionMode, *NotQualified) {
	v := j.Object().GetAnnotations()[DisruptionModeAnnotation]
	if d, ok := j.(DisruptionDefaulter); ok && v == "" {
		v = d.DefaultDisruptionMode()
	}
	if m, ok := ParseDisruptionMode(v); ok {
		return m, nil
	}
	return nil, &NotQualified{Condition: DisruptionModeAnnotation + "=" + strconv.Quote(v) + " is not a disruption mode", Fix: `use "all" (default) or "single"`}
}

// ParseDisruptionMode reads a DisruptionModeAnnotation value: "" and "all"
// are all, "single" is single; ok is false for anything else.
func ParseDisruptionMode(v string) (m *lockv1.DisruptionMode, ok bool) {
	switch v {
	case "", "all":
		return &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}}, true
	case "single":
		return &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}, true
	}
	return nil, false
}

// Scope is the job's gang scope: the annotation's, else the kind's default
// (DefaultScoper), else "job".
func Scope(j GenericJob) string {
	switch j.Object().GetAnnotations()[GangScopeAnnotation] {
	case ScopeRole:
		return ScopeRole
	case ScopeJob:
		return ScopeJob
	}
	if d, ok := j.(DefaultScoper); ok {
		return d.DefaultScope()
	}
	return ScopeJob
}

// ScopeError explains a bad gang-scope annotation, nil when it is valid.
func ScopeError(j GenericJob) *NotQualified {
	switch v := j.Object().GetAnnotations()[GangScopeAnnotation]; v {
	case "", ScopeJob, ScopeRole:
		return nil
	default:
		return &NotQualified{Condition: GangScopeAnnotation + "=" + strconv.Quote(v) + " is not a gang scope", Fix: `use "job" (default: one gang of every pod) or "role" (one gang per role)`}
	}
}

// OwnerVia is the job of kind owner that a pod belongs to through its
// controller of kind via (a pod → its Job → the JobSet that controls the
// Job), read with get into obj; "" when the chain does not hold (a stale
// reference, a via object no owner of that kind controls).
func OwnerVia(ctx context.Context, get Getter, pod *corev1.Pod, via schema.GroupVersionKind, obj client.Object, owner schema.GroupVersionKind) (string, types.UID, error) {
	ref, ok := ControllerOf(pod, via)
	if !ok {
		return "", "", nil
	}
	if err := get.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", nil
		}
		return "", "", err
	}
	if obj.GetUID() != ref.UID {
		return "", "", nil
	}
	if o, ok := ControllerOf(obj, owner); ok {
		return o.Name, o.UID, nil
	}
	return "", "", nil
}

// ControlledByMatch is a CEL expression true for an admitted pod with an
// owner reference to gvk: the pod admission match of a kind whose
// controller creates its pods itself, so a pod that arrives without its
// group (its job's template mutation was skipped) is labelled by the pod
// webhook rather than scheduled alone.
func ControlledByMatch(gvk schema.GroupVersionKind) string {
	return `(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, o.kind == "` + gvk.Kind + `" && o.apiVersion == "` + gvk.GroupVersion().String() + `"))`
}

// controllerIs reports whether ref is a controller reference to gvk.
func controllerIs(ref metav1.OwnerReference, gvk schema.GroupVersionKind) bool {
	return ref.Controller != nil && *ref.Controller && ref.Kind == gvk.Kind && ref.APIVersion == gvk.GroupVersion().String()
}

// ControllerOf is o's controller reference if it is of kind gvk.
func ControllerOf(o metav1.Object, gvk schema.GroupVersionKind) (metav1.OwnerReference, bool) {
	for _, ref := range o.GetOwnerReferences() {
		if controllerIs(ref, gvk) {
			return ref, true
		}
	}
	return metav1.OwnerReference{}, false
}
