package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodDeviceHealth(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "a", AllocatedResourcesStatus: []corev1.ResourceStatus{
			{Name: "claim:p-gpu/gpu", Resources: []corev1.ResourceHealth{{ResourceID: "gpu.example.com/n/gpu-1", Health: corev1.ResourceHealthStatusHealthy}}},
			{Name: "nvidia.com/gpu", Resources: []corev1.ResourceHealth{{ResourceID: "GPU-7f3c", Health: corev1.ResourceHealthStatusUnknown}}},
		}},
		// A second container sharing the claim sees the device Unhealthy: the worse report wins.
		{Name: "b", AllocatedResourcesStatus: []corev1.ResourceStatus{
			{Name: "claim:p-gpu/gpu", Resources: []corev1.ResourceHealth{{ResourceID: "gpu.example.com/n/gpu-1", Health: corev1.ResourceHealthStatusUnhealthy, Message: ptr.To("ECC")}}},
		}},
	}
	got := PodDeviceHealth(p)
	want := []DeviceHealth{
		{Pod: "p", Resource: "nvidia.com/gpu", Device: "GPU-7f3c", Health: corev1.ResourceHealthStatusUnknown},
		{Pod: "p", Resource: "claim:p-gpu/gpu", Device: "gpu.example.com/n/gpu-1", Health: corev1.ResourceHealthStatusUnhealthy, Message: "ECC"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"nvidia.com/gpu", "gpu.example.com"}, []string{got[0].Kind(), got[1].Kind()}); diff != "" {
		t.Errorf("kinds (-want,+got):\n%s", diff)
	}
}

// TestKindOfACDIDevice: a real kubelet reports a DRA device by the first CDI
// device ID its driver prepared it with; its kind is the CDI kind.
func TestKindOfACDIDevice(t *testing.T) {
	for dev, want := range map[string]string{
		"k8s.gpu.nvidia.com/device=gpu-0": "k8s.gpu.nvidia.com/device",
		"gpu.example.com/gpu=gpu-1":       "gpu.example.com/gpu",
		"gpu.example.com/node-0/gpu-1":    "gpu.example.com",
	} {
		if got := (DeviceHealth{Resource: "claim:p-gpu/gpu", Device: dev}).Kind(); got != want {
			t.Errorf("Kind of %s = %q, want %q", dev, got, want)
		}
	}
}
