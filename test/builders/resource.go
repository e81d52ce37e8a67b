package builders

import (
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClaimSpec is a claim for count devices of a DeviceClass.
func ClaimSpec(deviceClass string, count int64) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{
			Name: "dev",
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: deviceClass,
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Count:           count,
			},
		}},
	}}
}

// ClaimTemplate is a ResourceClaimTemplate for count devices of a class.
func ClaimTemplate(ns, name, deviceClass string, count int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: Meta(ns, name),
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: ClaimSpec(deviceClass, count)},
	}
}

// Claim is a ResourceClaim for count devices of a class.
func Claim(ns, name, deviceClass string, count int64) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: Meta(ns, name), Spec: ClaimSpec(deviceClass, count)}
}

// ExtendedResourceClass is a DeviceClass of every device of driver that
// serves the extended resource name (spec.extendedResourceName).
func ExtendedResourceClass(name, driver, resource string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{
			Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}},
			ExtendedResourceName: &resource,
		},
	}
}
