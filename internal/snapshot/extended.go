package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/klog/v2"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// ExtendedClass returns the DeviceClass that serves the extended resource
// name — by its spec.extendedResourceName, or the implicit
// deviceclass.resource.kubernetes.io/<class> — or nil. Several classes
// naming one resource resolve as kube-scheduler resolves them (its
// ExtendedResourceCache: the newest, then by name).
func (s *Snapshot) ExtendedClass(name corev1.ResourceName) *resourcev1.DeviceClass {
	if !s.Features.DRAExtendedResource || !schedutil.IsDRAExtendedResourceName(name) {
		return nil
	}
	if s.extended == nil {
		s.extended = extendedresourcecache.NewExtendedResourceCache(klog.Background())
		for _, c := range s.Classes {
			s.extended.OnAdd(c, true)
		}
	}
	return s.extended.GetDeviceClass(name)
}

// DelegatedToDRA reports whether node ni gets the extended resource name
// from DRA: no device plugin there advertises it (allocatable 0) and a
// DeviceClass serves it — kube-scheduler's NodeResourcesFit then leaves it
// to DynamicResources.
func (s *Snapshot) DelegatedToDRA(ni *NodeInfo, name corev1.ResourceName) bool {
	return ni.Allocatable.Scalar[name] == 0 && s.ExtendedClass(name) != nil
}
