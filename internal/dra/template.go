package dra

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// ClaimFromTemplate is the ResourceClaim kube-controller-manager's
// resourceclaim controller makes for the pod's claim podClaim from
// template t — named <pod>-<claim>, owned by the pod, with the template's
// labels, annotations and spec — recorded in the pod's
// status.resourceClaimStatuses, as the controller records it. It is for
// what decides before the pod exists (a what-if, Kueue's admission check,
// the simulator): uid is the claim's.
func ClaimFromTemplate(p *corev1.Pod, podClaim string, t *resourcev1.ResourceClaimTemplate, uid types.UID) *resourcev1.ResourceClaim {
	name := p.Name + "-" + podClaim
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: name, UID: uid,
			Labels: t.Spec.Labels, Annotations: t.Spec.Annotations, CreationTimestamp: p.CreationTimestamp,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: *t.Spec.Spec.DeepCopy(),
	}
	p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: podClaim, ResourceClaimName: ptr.To(name)})
	return c
}
