package builders

import (
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClaimWrapper builds a ResourceClaim.
type ClaimWrapper struct{ resourcev1.ResourceClaim }

// MakeClaim starts a claim with no request; Request adds them.
func MakeClaim() *ClaimWrapper { return &ClaimWrapper{} }

// Obj returns the built claim.
func (w *ClaimWrapper) Obj() *resourcev1.ResourceClaim { return &w.ResourceClaim }

func (w *ClaimWrapper) Name(n string) *ClaimWrapper      { w.ResourceClaim.Name = n; return w }
func (w *ClaimWrapper) Namespace(n string) *ClaimWrapper { w.ResourceClaim.Namespace = n; return w }
func (w *ClaimWrapper) UID(u types.UID) *ClaimWrapper    { w.ResourceClaim.UID = u; return w }

// Request adds a request named name for count devices of a DeviceClass.
func (w *ClaimWrapper) Request(name, deviceClass string, count int64) *ClaimWrapper {
	w.Spec.Devices.Requests = append(w.Spec.Devices.Requests, resourcev1.DeviceRequest{
		Name: name,
		Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: deviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
		},
	})
	return w
}

// Allocated records an allocation of the devices (driver, pool, device) to
// request, on node (the pool's node).
func (w *ClaimWrapper) Allocated(node, request, driver, pool string, devices ...string) *ClaimWrapper {
	if w.Status.Allocation == nil {
		w.Status.Allocation = &resourcev1.AllocationResult{}
		if node != "" {
			w.Status.Allocation.NodeSelector = nodeSelectorFor(node)
		}
	}
	for _, d := range devices {
		w.Status.Allocation.Devices.Results = append(w.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: request, Driver: driver, Pool: pool, Device: d,
		})
	}
	return w
}

// ReservedFor adds a pod to status.reservedFor.
func (w *ClaimWrapper) ReservedFor(pod string, uid types.UID) *ClaimWrapper {
	w.Status.ReservedFor = append(w.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod, UID: uid})
	return w
}

// OwnedByPod marks the claim as generated for a pod from a template.
func (w *ClaimWrapper) OwnedByPod(pod string, uid types.UID) *ClaimWrapper {
	controller := true
	w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod, UID: uid, Controller: &controller})
	return w
}
