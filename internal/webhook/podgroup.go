package webhook

import (
	"context"
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// PodGroupValidator rejects PodGroups that can only deadlock, that would
// raise their own priority above their members', or that ask for what
// Lockstep does not do. (Static rules — minCount ≥ 1, one policy, immutable
// fields — are in the CRD schema and run first.)
type PodGroupValidator struct {
	reads
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
	return nil, v.validate(ctx, pg, errs)
}

// ValidateUpdate implements admission.Validator.
func (v *PodGroupValidator) ValidateUpdate(ctx context.Context, _, pg *lockv1.PodGroup) (admission.Warnings, error) {
	return nil, v.validate(ctx, pg, nil)
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
		if size, job, ok := v.ownerJobSize(ctx, ns, pg); ok && g.MinCount > size {
			errs = append(errs, field.Invalid(spec.Child("schedulingPolicy", "gang", "minCount"), g.MinCount,
				fmt.Sprintf("larger than %s can ever run (%d pods at once): the gang would wait forever; set minCount to at most %d or raise its parallelism", job, size, size)))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: lockv1.GroupVersion.Group, Kind: "PodGroup"}, pg.Name, errs)
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
