package dra

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// ExtendedClaim is the ResourceClaim that serves a pod's extended resources
// backed by DRA on one node (a container asking for example.com/gpu: 1 on a
// node where a DeviceClass, not a device plugin, provides it), with the
// container → request mappings for pod.status.extendedResourceClaimStatus.
// It is built in memory by placement and created by the binder, as
// kube-scheduler's DynamicResources plugin does (annotation
// resource.kubernetes.io/extended-resource-claim, the pod as controller,
// name generated from "<pod>-extended-resources-").
type ExtendedClaim struct {
	Claim    *resourcev1.ResourceClaim
	Mappings []corev1.ContainerExtendedResourceRequest
}

// IsExtendedClaim reports whether c is a claim created for a pod's
// extended resources.
func IsExtendedClaim(c *resourcev1.ResourceClaim) bool {
	return c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] == "true"
}

// ExtendedClaimOwner is the UID of the pod an extended-resource claim was
// created for ("" if c is not one).
func ExtendedClaimOwner(c *resourcev1.ResourceClaim) types.UID {
	if !IsExtendedClaim(c) {
		return ""
	}
	for _, o := range c.OwnerReferences {
		if o.Kind == "Pod" && ptr.Deref(o.Controller, false) {
			return o.UID
		}
	}
	return ""
}

// NewExtendedClaim builds the claim for the given extended resources of pod
// (those a node gets from DRA), each served by classOf(resource). The claim's
// name is a placeholder that no API object can have; the binder creates it
// with a generated name.
//
// Requests and mappings follow kube-scheduler 1.37's rules (its helper is
// unexported): one request per long-lived container (regular or sidecar)
// and resource, named container-<index>-request-<index of the resource among
// the container's sorted requests>; init containers that run to completion
// first reuse the devices of the long-lived containers that start after
// them, and share one request sized for the largest remaining need.
func NewExtendedClaim(pod *corev1.Pod, resources []corev1.ResourceName, classOf func(corev1.ResourceName) *resourcev1.DeviceClass) *ExtendedClaim {
	containers := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	nInit := len(pod.Spec.InitContainers)
	var requests []resourcev1.DeviceRequest
	var mappings []corev1.ContainerExtendedResourceRequest
	names := slices.Clone(resources)
	slices.Sort(names)
	for _, rName := range names {
		class := classOf(rName)
		if class == nil {
			continue
		}
		long := make([]*resourcev1.DeviceRequest, len(containers))
		var longMaps, shortMaps []corev1.ContainerExtendedResourceRequest
		for i := range containers {
			if i < nInit && !isSidecar(&containers[i]) {
				continue
			}
			req, maps := containerRequest(i, &containers[i], rName, class.Name, nil)
			long[i] = req
			longMaps = append(longMaps, maps...)
		}
		var biggest *resourcev1.DeviceRequest
		shortNames := map[string]bool{}
		for i := 0; i < nInit; i++ {
			if isSidecar(&containers[i]) {
				continue
			}
			req, maps := containerRequest(i, &containers[i], rName, class.Name, long[i:])
			if req != nil {
				shortNames[req.Name] = true
				if biggest == nil || biggest.Exactly.Count < req.Exactly.Count {
					biggest = req
				}
			}
			shortMaps = append(shortMaps, maps...)
		}
		if biggest != nil {
			for i := range shortMaps {
				if shortNames[shortMaps[i].RequestName] {
					shortMaps[i].RequestName = biggest.Name
				}
			}
			requests = append(requests, *biggest)
		}
		for _, r := range long {
			if r != nil {
				requests = append(requests, *r)
			}
		}
		mappings = append(append(mappings, longMaps...), shortMaps...)
	}
	if len(requests) == 0 {
		return nil
	}
	slices.SortFunc(requests, func(a, b resourcev1.DeviceRequest) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return &ExtendedClaim{
		Claim: &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:    pod.Namespace,
				Name:         extendedClaimPlaceholder(pod),
				GenerateName: pod.Name + "-extended-resources-",
				Annotations:  map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
				}},
			},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}},
		},
		Mappings: mappings,
	}
}

// extendedClaimPlaceholder names the in-memory claim: unique per pod, and
// not a valid object name, so it never collides with a real claim.
func extendedClaimPlaceholder(pod *corev1.Pod) string {
	return "<extended-resources>/" + string(pod.UID)
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// containerRequest is container i's request for rName after reusing the
// devices of reusable (entries may be nil), and its mappings; the request
// is nil when the container needs nothing more.
func containerRequest(i int, c *corev1.Container, rName corev1.ResourceName, class string, reusable []*resourcev1.DeviceRequest) (*resourcev1.DeviceRequest, []corev1.ContainerExtendedResourceRequest) {
	q, ok := c.Resources.Requests[rName]
	if !ok {
		return nil, nil
	}
	want, ok := q.AsInt64()
	if !ok || want == 0 {
		return nil, nil
	}
	var maps []corev1.ContainerExtendedResourceRequest
	have := int64(0)
	for _, r := range reusable {
		if r == nil {
			continue
		}
		have += r.Exactly.Count
		maps = append(maps, corev1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(rName), RequestName: r.Name})
		if have >= want {
			return nil, maps
		}
	}
	keys := make([]string, 0, len(c.Resources.Requests))
	for k := range c.Resources.Requests {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	name := fmt.Sprintf("container-%d-request-%d", i, slices.Index(keys, string(rName)))
	maps = append(maps, corev1.ContainerExtendedResourceRequest{ContainerName: c.Name, ResourceName: string(rName), RequestName: name})
	return &resourcev1.DeviceRequest{
		Name: name,
		Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: class,
			AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
			Count:           want - have,
		},
	}, maps
}
