package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// PodWrapper builds a Pod.
type PodWrapper struct{ corev1.Pod }

// MakePod starts a pod with one container named "main" and image "sim".
func MakePod() *PodWrapper {
	return &PodWrapper{corev1.Pod{
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "main", Image: "sim"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}}
}

// Obj returns the built pod.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }

func (w *PodWrapper) Name(n string) *PodWrapper      { w.Pod.Name = n; return w }
func (w *PodWrapper) Namespace(n string) *PodWrapper { w.Pod.Namespace = n; return w }
func (w *PodWrapper) Scheduler(n string) *PodWrapper { w.Spec.SchedulerName = n; return w }
func (w *PodWrapper) Node(n string) *PodWrapper      { w.Spec.NodeName = n; return w }

// Label sets a label.
func (w *PodWrapper) Label(k, v string) *PodWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Annotation sets an annotation.
func (w *PodWrapper) Annotation(k, v string) *PodWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// Req adds a request (and an equal limit) to the first container.
func (w *PodWrapper) Req(name corev1.ResourceName, qty string) *PodWrapper {
	c := &w.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Requests[name] = resource.MustParse(qty)
	c.Resources.Limits[name] = resource.MustParse(qty)
	return w
}

// ClaimTemplate adds a pod claim generated from a ResourceClaimTemplate and
// lets the first container use it.
func (w *PodWrapper) ClaimTemplate(name, template string) *PodWrapper {
	w.Spec.ResourceClaims = append(w.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(template)})
	return w.useClaim(name)
}

// Claim adds a pod claim that names an existing ResourceClaim.
func (w *PodWrapper) Claim(name, claim string) *PodWrapper {
	w.Spec.ResourceClaims = append(w.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(claim)})
	return w.useClaim(name)
}

func (w *PodWrapper) useClaim(name string) *PodWrapper {
	c := &w.Spec.Containers[0]
	c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: name})
	return w
}

// Meta returns ObjectMeta with name and namespace, for other builders.
func Meta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// Quantity parses a quantity (for ResourceLists in tests).
func Quantity(s string) resource.Quantity { return resource.MustParse(s) }
