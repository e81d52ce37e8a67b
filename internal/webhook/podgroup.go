package webhook

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/podquota"
)

// PodGroupValidator rejects PodGroups that can only deadlock, that would
// raise their own priority above their members', whose name cannot be a
// label value or whose topology key cannot be a node label, whose parent
// CompositePodGroup would make the tree too deep or give it too many
// children (treeChecks), that change their preemptionPolicy or parent, or
// that ask for what Lockstep does not do; it
// warns about topology keys no node carries (and a device attribute no
// device publishes). (Static rules — minCount ≥ 1, one policy, immutable
// fields — are in the CRD schema and run first.)
type PodGroupValidator struct {
	reads
	topologyView
}

var _ admission.Validator[*lockv1.PodGroup] = (*PodGroupValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *PodGroupValidator) ValidateCreate(ctx context.Context, pg *lockv1.PodGroup) (admission.Warnings, error) {
	ns := namespaceOf(ctx, pg.Namespace)
	errs, err := v.groupPriorityAgrees(ctx, ns, pg)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if len(pg.Spec.ResourceClaims) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resourceClaims"),
			"claims reserved for a whole PodGroup are not supported by Lockstep: give each pod its own claim from a ResourceClaimTemplate, or share one ResourceClaim through the pods' spec.resourceClaims (at most 256 pods can reserve one claim)"))
	}
	errs = append(errs, validateName(pg.Name)...)
	errs = append(errs, validateTopologyAt(field.NewPath("spec"), pg.Spec.SchedulingConstraints, "PodGroup")...)
	errs = append(errs, validateTopologyAnnotations(nil, pg)...)
	errs = append(errs, classForbiddenByQuota(ctx, v.Cached, ns, field.NewPath("spec"), pg.Spec.PriorityClassName)...)
	treeErrs, err := treeChecks{v.Cached}.place(ctx, ns, node{name: pg.Name}, podgroup.ParentOf(pg))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	errs = append(errs, treeErrs...)
	return v.topologyWarnings("group", pg, specKeyAt), v.validate(ctx, pg, errs)
}

// ValidateUpdate implements admission.Validator: the new spec must be
// valid, and preemptionPolicy cannot change — it only ever makes the
// group's preemption stricter than its members' (preemption.Allowed), and
// the scheduler may already have acted on it. (The CRD schema refuses the
// same since this release; the webhook also holds it on a cluster whose
// CRDs predate it — Helm installs crds/ once and never upgrades them.)
func (v *PodGroupValidator) ValidateUpdate(ctx context.Context, old, pg *lockv1.PodGroup) (admission.Warnings, error) {
	var errs field.ErrorList
	if was, is := policyOf(old.Spec.PreemptionPolicy), policyOf(pg.Spec.PreemptionPolicy); was != is {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "preemptionPolicy"),
			fmt.Sprintf("a PodGroup's preemptionPolicy is fixed when it is created (it is %s): restore it, or delete the PodGroup and create it with the policy you want", was)))
	}
	if was, is := podgroup.ParentOf(old), podgroup.ParentOf(pg); was != is {
		errs = append(errs, field.Forbidden(parentPath,
			fmt.Sprintf("a PodGroup's parentCompositePodGroupName is fixed when it is created (it is %q): restore it, or delete the PodGroup and create it under the parent you want", was)))
	}
	errs = append(errs, validateTopologyAnnotations(old, pg)...)
	if old.Spec.PriorityClassName != pg.Spec.PriorityClassName {
		errs = append(errs, classForbiddenByQuota(ctx, v.Cached, namespaceOf(ctx, pg.Namespace), field.NewPath("spec"), pg.Spec.PriorityClassName)...)
	}
	return v.topologyWarnings("group", pg, specKeyAt), v.validate(ctx, pg, errs)
}

// checkDuration refuses a value that is not a positive Go duration.
func checkDuration(v string) *podgroup.KeyError {
	if _, err := podgroup.ParseMinRuntime(v); err != nil {
		return &podgroup.KeyError{Problem: "not a positive duration", Fix: "write a Go duration such as 30m or 2h"}
	}
	return nil
}

// validateTopologyAnnotations refuses a preferred-topology,
// device-topology or capacity-types annotation a Job would be refused for (podgroup.CheckKeys,
// CheckDeviceAttribute): the same value means the same on every object.
// On an update (old set) only a value that changed is judged, so a group
// made before the check keeps working.
func validateTopologyAnnotations(old, pg *lockv1.PodGroup) field.ErrorList {
	var errs field.ErrorList
	for key, check := range map[string]func(string) *podgroup.KeyError{
		lockv1.PreferredTopologyAnnotation: podgroup.CheckKeys,
		lockv1.DeviceTopologyAnnotation:    podgroup.CheckDeviceAttribute,
		lockv1.CapacityTypesAnnotation: func(v string) *podgroup.KeyError {
			_, err := podgroup.ParseCapacityTypes(v)
			return err
		},
		lockv1.MinRuntimeAnnotation:       checkDuration,
		lockv1.PreemptionNoticeAnnotation: checkDuration,
		lockv1.PreemptionDelayAnnotation:  checkDuration,
		lockv1.MaxRuntimeAnnotation:       checkDuration,
		lockv1.CheckpointedAtAnnotation: func(v string) *podgroup.KeyError {
			if podgroup.TimeAnnotation(map[string]string{"t": v}, "t").IsZero() {
				return &podgroup.KeyError{Problem: "not an RFC 3339 time", Fix: "write the time of the checkpoint such as 2026-12-03T10:30:00Z (date -u +%Y-%m-%dT%H:%M:%SZ)"}
			}
			return nil
		},
	} {
		v, set := pg.Annotations[key]
		if !set || old != nil && old.Annotations[key] == v {
			continue
		}
		if err := check(v); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(key), v, err.Error()))
		}
	}
	return errs
}

// preemptionNotGranted warns when a group asks to preempt for a member
// whose PriorityClass says Never: the member's Never wins
// (preemption.Allowed), so the group's policy is not what happens.
func preemptionNotGranted(pg *lockv1.PodGroup, pod *corev1.Pod) string {
	if pg.Spec.PreemptionPolicy == nil || *pg.Spec.PreemptionPolicy != lockv1.PreemptLowerPriority ||
		pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != corev1.PreemptNever {
		return ""
	}
	return fmt.Sprintf("PodGroup %s says preemptionPolicy %s, but pod %s has preemptionPolicy Never (from PriorityClass %q): a group cannot grant its pods a preemption their PriorityClass forbids, so the gang will wait rather than preempt; give the pods a PriorityClass whose preemptionPolicy is PreemptLowerPriority if it should preempt",
		pg.Name, lockv1.PreemptLowerPriority, pod.Name+pod.GenerateName, pod.Spec.PriorityClassName)
}

// policyOf names a preemptionPolicy for messages ("unset" when it is).
func policyOf(p *lockv1.PreemptionPolicy) string {
	if p == nil {
		return "unset"
	}
	return string(*p)
}

// ValidateDelete implements admission.Validator.
func (v *PodGroupValidator) ValidateDelete(context.Context, *lockv1.PodGroup) (admission.Warnings, error) {
	return nil, nil
}

func (v *PodGroupValidator) validate(ctx context.Context, pg *lockv1.PodGroup, errs field.ErrorList) error {
	ns := namespaceOf(ctx, pg.Namespace)
	spec := field.NewPath("spec")
	errs = append(errs, validatePriority(ctx, v.Cached, spec, pg.Spec.PriorityClassName, pg.Spec.Priority)...)
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		path := spec.Child("schedulingPolicy", "gang", "minCount")
		size, job, owned := v.ownerJobSize(ctx, ns, pg)
		switch {
		case owned && g.MinCount > size:
			errs = append(errs, field.Invalid(path, g.MinCount,
				fmt.Sprintf("larger than %s can ever run (%d pods at once): the gang would wait forever; set minCount to at most %d or raise its parallelism", job, size, size)))
		case !owned && g.MinCount > MaxMinCount:
			errs = append(errs, field.Invalid(path, g.MinCount,
				fmt.Sprintf("more than %d, the most pods one workload can run at once (an Indexed Job's parallelism is capped at %d): the gang would wait forever; set minCount to the number of pods that must run together, at most %d", MaxMinCount, MaxMinCount, MaxMinCount)))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: lockv1.GroupVersion.Group, Kind: "PodGroup"}, pg.Name, errs)
}

// MaxMinCount bounds the minCount of a PodGroup no job owns (written by
// hand, or by a controller Lockstep does not integrate). Upstream caps
// nothing; a larger gang can never be placed, so it would wait for ever
// and say only "does not fit". The bound is the most pods one workload the
// API server accepts can run at once: batch/v1 caps an Indexed Job's
// parallelism at 100,000 — also below Kubernetes' tested envelope of
// 150,000 pods in a whole cluster. A job's own group is bounded by the
// job's size instead.
const MaxMinCount = 100_000

// validateName: a PodGroup's name is the value of its members' membership
// label, so it must be a valid label value (at most 63 characters; the
// API server allows 253 for the object).
func validateName(name string) field.ErrorList {
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name,
			fmt.Sprintf("a PodGroup's name is the value of its pods' label %s, and %s: choose a name of at most %d characters",
				lockv1.PodGroupLabel, strings.Join(errs, "; "), validation.LabelValueMaxLength))}
	}
	return nil
}

// validateTopologyAt: each topology key of a PodGroup or
// CompositePodGroup (kind) names a node label, so it must be a valid label
// key; a group keyed by anything else never fits anywhere.
func validateTopologyAt(spec *field.Path, c *lockv1.PodGroupSchedulingConstraints, kind string) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	path := spec.Child("schedulingConstraints", "topology")
	for i, t := range c.Topology {
		if e := validation.IsQualifiedName(t.Key); len(e) > 0 {
			errs = append(errs, field.Invalid(path.Index(i).Child("key"), t.Key,
				fmt.Sprintf("not a valid label key (%s), so no node can carry it and the %s could never be placed: use the key of a label your nodes carry, e.g. %s", strings.Join(e, "; "), kind, corev1.LabelTopologyZone)))
		}
	}
	return errs
}

// ownerJobSize returns the size of the group's job: how many pods the
// group has when the job runs whole.
func (v *PodGroupValidator) ownerJobSize(ctx context.Context, ns string, pg *lockv1.PodGroup) (int32, string, bool) {
	var ref metav1.OwnerReference
	var integ jobintegration.Integration
	for _, o := range pg.OwnerReferences {
		if integ = integrationSet.ForKind(o.APIVersion, o.Kind); integ != nil {
			ref = o
			break
		}
	}
	if integ == nil {
		return 0, "", false
	}
	obj := integ.NewObject()
	if err := v.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, obj); err != nil || obj.GetUID() != ref.UID {
		return 0, "", false
	}
	j := integ.Wrap(obj)
	size := jobintegration.Size(j)
	if groups, err := jobintegration.Groups(j); err == nil {
		for _, g := range groups {
			if g.Name == pg.Name {
				size = g.Size
			}
		}
	}
	return size, ref.Kind + " " + ref.Name, true
}

// classForbiddenByQuota refuses a group's priorityClassName that a
// ResourceQuota of its namespace allows no pod of (its scopes count such a
// pod and its hard pods or count/pods is 0, as `scopeSelector:
// PriorityClass In [x]` with `pods: 0` does): a group's priority is its
// members', none of which can have the class there, so the field would be
// silently ignored. Read from the quota cache; a class the API server's
// limitedResources configuration keeps to quota-covered namespaces cannot
// be seen from the API and is left to pod admission.
func classForbiddenByQuota(ctx context.Context, c client.Reader, ns string, spec *field.Path, className string) field.ErrorList {
	if className == "" {
		return nil
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := c.List(ctx, quotas, client.InNamespace(ns)); err != nil {
		return field.ErrorList{field.InternalError(spec.Child("priorityClassName"), err)}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: corev1.PodSpec{PriorityClassName: className}}
	e, err := podquota.New(clock.RealClock{}).Forbids(quotas.Items, pod)
	if err != nil {
		return field.ErrorList{field.InternalError(spec.Child("priorityClassName"), err)}
	}
	if e == nil {
		return nil
	}
	return field.ErrorList{field.Forbidden(spec.Child("priorityClassName"), fmt.Sprintf(
		"ResourceQuota %s of namespace %s allows no pod of PriorityClass %s (%s: %s): a group's priority is its members', and no member can have this class here; use a class this namespace may create pods with, or ask the cluster administrator for quota",
		e.Quota, ns, className, e.Resource, e.Hard.String()))}
}

// validatePriority: a named class must exist, and an explicit priority must
// equal its class's value — a group may not pick its own priority.
func validatePriority(ctx context.Context, c client.Reader, spec *field.Path, className string, priority *int32) field.ErrorList {
	if className == "" {
		if priority != nil {
			return field.ErrorList{field.Forbidden(spec.Child("priority"), "set priorityClassName instead: a priority without a class would let a group raise itself above others")}
		}
		return nil
	}
	pc := &schedulingv1.PriorityClass{}
	err := c.Get(ctx, types.NamespacedName{Name: className}, pc)
	if apierrors.IsNotFound(err) {
		return field.ErrorList{field.Invalid(spec.Child("priorityClassName"), className,
			"PriorityClass does not exist: use one of `kubectl get priorityclasses` or create it first")}
	}
	if err != nil {
		return field.ErrorList{field.InternalError(spec.Child("priorityClassName"), err)}
	}
	if priority != nil && *priority != pc.Value {
		return field.ErrorList{field.Invalid(spec.Child("priority"), *priority,
			fmt.Sprintf("does not match PriorityClass %s (%d): remove spec.priority or set it to %d", className, pc.Value, pc.Value))}
	}
	return nil
}
