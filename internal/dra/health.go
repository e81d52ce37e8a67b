package dra

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DeviceHealth is one device a pod's containers report the health of.
type DeviceHealth struct {
	Pod string `json:"pod"`
	// Resource is the status entry it is reported under: "claim:<claim>/<request>"
	// for a DRA device, the resource name (nvidia.com/gpu) for a device plugin's.
	Resource string `json:"resource"`
	// Device is the ResourceID the kubelet reports: for a DRA device the
	// first CDI device ID its driver prepared it with ("<vendor>/<class>=<name>",
	// e.g. k8s.gpu.nvidia.com/device=gpu-0), or "<driver>/<pool>/<device>"
	// when the driver gave none; the device plugin's device ID otherwise.
	Device  string                      `json:"device"`
	Health  corev1.ResourceHealthStatus `json:"health"`
	Message string                      `json:"message,omitempty"`
}

// Kind is what reported the device: a DRA device's CDI kind
// ("<vendor>/<class>") or, without CDI, its driver's name; the extended
// resource of a device plugin — low-cardinality, a metric label.
func (d DeviceHealth) Kind() string {
	if strings.HasPrefix(d.Resource, "claim:") {
		if kind, _, ok := strings.Cut(d.Device, "="); ok {
			return kind
		}
		if driver, _, ok := strings.Cut(d.Device, "/"); ok {
			return driver
		}
	}
	return d.Resource
}

// String is "device gpu.example.com/node-0/gpu-1 (claim:train-0-gpu/gpu) is
// Unhealthy: ECC error".
func (d DeviceHealth) String() string {
	s := fmt.Sprintf("device %s (%s) is %s", d.Device, d.Resource, d.Health)
	if d.Message != "" {
		s += ": " + d.Message
	}
	return s
}

// PodDeviceHealth is the health the pod's kubelet reports for every device
// allocated to its containers, one entry per device (a device several
// containers share is reported once; the least healthy report wins), sorted
// by device. The kubelet stops updating it once the pod has terminated.
func PodDeviceHealth(p *corev1.Pod) []DeviceHealth {
	byDevice := map[string]DeviceHealth{}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range statuses {
			for _, rs := range cs.AllocatedResourcesStatus {
				for _, r := range rs.Resources {
					d := DeviceHealth{Pod: p.Name, Resource: string(rs.Name), Device: string(r.ResourceID), Health: r.Health}
					if r.Message != nil {
						d.Message = *r.Message
					}
					if prev, ok := byDevice[d.Device]; !ok || worse(d.Health, prev.Health) {
						byDevice[d.Device] = d
					}
				}
			}
		}
	}
	out := make([]DeviceHealth, 0, len(byDevice))
	for _, d := range byDevice {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out
}

func worse(a, b corev1.ResourceHealthStatus) bool { return rank(a) > rank(b) }

func rank(h corev1.ResourceHealthStatus) int {
	switch h {
	case corev1.ResourceHealthStatusUnhealthy:
		return 2
	case corev1.ResourceHealthStatusUnknown:
		return 1
	}
	return 0
}
