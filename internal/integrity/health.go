package integrity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/dra"
)

// ReasonDeviceUnhealthy ends an incarnation whose member's kubelet reports
// one of its allocated devices Unhealthy (pod status
// allocatedResourcesStatus, ResourceHealthStatus), and marks the pod that
// disruptionMode single takes down alone.
const ReasonDeviceUnhealthy = "DeviceUnhealthy"

// PodReasonDeviceUnhealthy is the DisruptionTarget reason on a member of a
// gang with disruptionMode single evicted alone for an unhealthy device.
const PodReasonDeviceUnhealthy = "DeviceUnhealthyByLockstep"

// unhealthy is the first device of the pod reported Unhealthy, or nil.
// Unknown is not unhealthy: the kubelet reports Unknown when a driver
// misses a health update (a timeout, a driver restarting), which passes.
func unhealthy(p *corev1.Pod) *dra.DeviceHealth {
	for _, d := range dra.PodDeviceHealth(p) {
		if d.Health == corev1.ResourceHealthStatusUnhealthy {
			return &d
		}
	}
	return nil
}

// UnhealthyMember is a member found on an unhealthy device: the pod and
// the device, for the events and the metric of the verdict that acts on it.
type UnhealthyMember struct {
	Pod    *corev1.Pod
	Device dra.DeviceHealth
}

// deviceUnhealthy judges a running member's device health: a device
// reported Unhealthy is a loss. With disruptionMode single the member is
// also to be taken down alone, once (not while it is already going).
func (j *judgement) deviceUnhealthy(p *corev1.Pod) {
	d := unhealthy(p)
	if d == nil {
		return
	}
	j.lose(ReasonDeviceUnhealthy, fmt.Sprintf("%s of pod %s", d, p.Name))
	j.unhealthy = append(j.unhealthy, UnhealthyMember{Pod: p, Device: *d})
}
