package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
)

// PodValidator only warns: about a PodGroup that does not exist yet and
// about claims whose DeviceClass is missing or matches no device.
type PodValidator struct {
	Client client.Reader
	CEL    *cel.Cache
}

// claimSource is a claim named directly or through a template.
type claimSource struct {
	name, template *string
}

var _ admission.Validator[*corev1.Pod] = (*PodValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *PodValidator) ValidateCreate(ctx context.Context, pod *corev1.Pod) (admission.Warnings, error) {
	ns := namespaceOf(ctx, pod.Namespace)
	var warnings admission.Warnings
	if g := pod.Labels[lockv1.PodGroupLabel]; g != "" && ownerJob(pod) == "" {
		err := v.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: g}, &lockv1.PodGroup{})
		if apierrors.IsNotFound(err) {
			warnings = append(warnings, fmt.Sprintf("PodGroup %s/%s does not exist yet: the pod waits, unscheduled, until it is created", ns, g))
		}
	}
	for _, pc := range pod.Spec.ResourceClaims {
		warnings = append(warnings, v.claimWarnings(ctx, ns, pc.Name, claimSource{pc.ResourceClaimName, pc.ResourceClaimTemplateName})...)
	}
	return warnings, nil
}

// claimWarnings warns about the DeviceClasses one claim asks for.
func (v *PodValidator) claimWarnings(ctx context.Context, ns, name string, src claimSource) admission.Warnings {
	classes, err := v.claimClasses(ctx, ns, src)
	if err != nil {
		return nil
	}
	return v.classWarnings(ctx, fmt.Sprintf("claim %q", name), classes)
}

// ValidateUpdate implements admission.Validator.
func (v *PodValidator) ValidateUpdate(context.Context, *corev1.Pod, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete implements admission.Validator.
func (v *PodValidator) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

func (v *PodValidator) claimClasses(ctx context.Context, ns string, src claimSource) ([]string, error) {
	var spec resourcev1.ResourceClaimSpec
	switch {
	case src.template != nil:
		t := &resourcev1.ResourceClaimTemplate{}
		if err := v.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: *src.template}, t); err != nil {
			return nil, err
		}
		spec = t.Spec.Spec
	case src.name != nil:
		c := &resourcev1.ResourceClaim{}
		if err := v.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: *src.name}, c); err != nil {
			return nil, err
		}
		spec = c.Spec
	}
	var classes []string
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil {
			classes = append(classes, r.Exactly.DeviceClassName)
		}
		for _, s := range r.FirstAvailable {
			classes = append(classes, s.DeviceClassName)
		}
	}
	return classes, nil
}

// classWarnings warns for each class that does not exist or that no device
// in any ResourceSlice matches.
func (v *PodValidator) classWarnings(ctx context.Context, what string, classes []string) admission.Warnings {
	var warnings admission.Warnings
	var slices []*resourcev1.ResourceSlice
	for _, name := range classes {
		dc := &resourcev1.DeviceClass{}
		err := v.Client.Get(ctx, types.NamespacedName{Name: name}, dc)
		if apierrors.IsNotFound(err) {
			warnings = append(warnings, fmt.Sprintf("%s: DeviceClass %q does not exist: the pod cannot be scheduled until it does (check the name, or install the DRA driver that provides it)", what, name))
			continue
		}
		if err != nil {
			continue
		}
		if slices == nil {
			if slices, err = v.slices(ctx); err != nil {
				return warnings
			}
		}
		if c := dra.CountClassIn(ctx, v.CEL, dc, slices, nil); c.Total == 0 {
			warnings = append(warnings, fmt.Sprintf("%s: no ResourceSlice in the cluster has a device of DeviceClass %q: the pod cannot be scheduled until a driver publishes one", what, name))
		}
	}
	return warnings
}

func (v *PodValidator) slices(ctx context.Context) ([]*resourcev1.ResourceSlice, error) {
	list := &resourcev1.ResourceSliceList{}
	if err := v.Client.List(ctx, list); err != nil {
		return nil, err
	}
	out := make([]*resourcev1.ResourceSlice, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

func namespaceOf(ctx context.Context, ns string) string {
	if ns != "" {
		return ns
	}
	if req, err := admission.RequestFromContext(ctx); err == nil {
		return req.Namespace
	}
	return ""
}
