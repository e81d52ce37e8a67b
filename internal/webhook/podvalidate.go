package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kueuegroup"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// PodValidator admits pods that target Lockstep. It refuses what would let
// a pod take what it could not get through the API server's own admission
// (a priority, another team's gang) and warns about what would keep it
// pending. Every read is from the webhook's caches.
type PodValidator struct {
	reads
	Claims *claimChecks
}

var _ admission.Validator[*corev1.Pod] = (*PodValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *PodValidator) ValidateCreate(ctx context.Context, pod *corev1.Pod) (admission.Warnings, error) {
	ns := namespaceOf(ctx, pod.Namespace)
	warnings, errs, err := v.joining(ctx, ns, pod)
	if err != nil {
		return nil, err
	}
	for _, pc := range pod.Spec.ResourceClaims {
		warnings = append(warnings, v.Claims.claimWarnings(ctx, ns, pc.Name, claimSource{pc.ResourceClaimName, pc.ResourceClaimTemplateName})...)
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.ResourceClaims) > 0 {
		warnings = append(warnings, fmt.Sprintf("spec.nodeName is set (%s): no scheduler sees this pod, so its ResourceClaims are never allocated and the kubelet cannot start it; "+
			"remove spec.nodeName and pin the pod with nodeSelector %s: %s instead", pod.Spec.NodeName, corev1.LabelHostname, pod.Spec.NodeName))
	}
	if len(errs) > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Pod refused", "pod", ns+"/"+pod.Name+pod.GenerateName, "errors", errs.ToAggregate().Error())
		return warnings, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, errs)
	}
	return warnings, nil
}

// joining checks the group a pod joins (on creation, or a Kueue group
// joined later): that it may join it, with its priority, and that a Kueue
// pod group it names can be read.
func (v *PodValidator) joining(ctx context.Context, ns string, pod *corev1.Pod) (admission.Warnings, field.ErrorList, error) {
	var warnings admission.Warnings
	var errs field.ErrorList
	group := pod.Labels[lockv1.PodGroupLabel]
	if k := kueuegroup.Named(pod); k != "" && podgroup.Ours(pod) && (group == "" || group == k) {
		// Never placed alone because its Kueue group was unreadable.
		errs = append(errs, kueuegroup.Validate(pod)...)
	}
	if group == "" {
		return nil, errs, nil
	}
	pg, err := v.podGroup(ctx, ns, group)
	switch {
	case apierrors.IsNotFound(err):
		pg = nil
		if kueuegroup.Named(pod) != group {
			warnings = append(warnings, fmt.Sprintf("PodGroup %s/%s does not exist yet: the pod waits, unscheduled, until it is created", ns, group))
		}
	case err != nil:
		return nil, nil, apierrors.NewInternalError(err)
	}
	for _, check := range []func(context.Context, string, *corev1.Pod, string, *lockv1.PodGroup) (field.ErrorList, error){v.membership, v.priority} {
		e, err := check(ctx, ns, pod, group, pg)
		if err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
		errs = append(errs, e...)
	}
	if pg != nil {
		warnings = append(warnings, v.Claims.sharedClaimWarnings(ctx, ns, pod, pg)...)
		if w := preemptionNotGranted(pg, pod); w != "" {
			warnings = append(warnings, w)
		}
	}
	return warnings, errs, nil
}

// ValidateUpdate implements admission.Validator: membership is fixed at
// creation. Adding, changing or removing the membership label would move a
// pod — pending or bound — into or out of a gang, past every check above.
// One exception: a pod not in a group joins the Kueue pod group Kueue
// labels it with after its creation (a StatefulSet's pods), while it is
// not bound, through the same checks as at creation.
func (v *PodValidator) ValidateUpdate(ctx context.Context, old, pod *corev1.Pod) (admission.Warnings, error) {
	was, is := podgroup.GroupOf(old), podgroup.GroupOf(pod)
	if was == is {
		return nil, nil
	}
	if was == "" && is == kueuegroup.Named(pod) && pod.Labels[lockv1.PodGroupLabel] == is && old.Spec.NodeName == "" && pod.Spec.NodeName == "" {
		ns := namespaceOf(ctx, pod.Namespace)
		warnings, errs, err := v.joining(ctx, ns, pod)
		if err != nil {
			return nil, err
		}
		if len(errs) > 0 {
			return warnings, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, errs)
		}
		return warnings, nil
	}
	msg := fmt.Sprintf("a pod's PodGroup is fixed when it is created (it was %s): delete the pod and create it with the label you want", orNone(was))
	return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, field.ErrorList{field.Forbidden(labelPath, msg)})
}

// ValidateDelete implements admission.Validator.
func (v *PodValidator) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
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
