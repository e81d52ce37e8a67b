package snapshot

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/features"
)

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	tests := map[string]struct {
		spec corev1.PodSpec
		want int64 // milli-CPU
	}{
		"containers add up": {
			spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: req("1")}, {Resources: req("500m")}}},
			want: 1500,
		},
		"an init container larger than the app sets the floor": {
			spec: corev1.PodSpec{InitContainers: []corev1.Container{{Resources: req("3")}}, Containers: []corev1.Container{{Resources: req("1")}}},
			want: 3000,
		},
		"a sidecar runs beside the app": {
			spec: corev1.PodSpec{InitContainers: []corev1.Container{{Resources: req("1"), RestartPolicy: &always}}, Containers: []corev1.Container{{Resources: req("1")}}},
			want: 2000,
		},
		"overhead counts": {
			spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: req("1")}}, Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
			want: 1250,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := PodRequests(&corev1.Pod{Spec: tc.spec}, features.Default())
			if got.MilliCPU != tc.want || got.Pods != 1 {
				t.Errorf("want %dm cpu and 1 pod, got %dm and %d", tc.want, got.MilliCPU, got.Pods)
			}
		})
	}
}

func TestSnapshotCountsBoundPodsOnly(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), "example.com/gpu": resource.MustParse("4"),
	}}}
	pod := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "example.com/gpu": resource.MustParse("1")}},
		}}}, Status: corev1.PodStatus{Phase: phase}}
	}
	s := New(Input{Nodes: []*corev1.Node{node}, Pods: []*corev1.Pod{
		pod("running", "n", corev1.PodRunning),
		pod("pending-unbound", "", corev1.PodPending),
		pod("done", "n", corev1.PodSucceeded),
		pod("bound-not-started", "n", corev1.PodPending),
	}})
	got := s.Node("n").Requested
	want := Resources{MilliCPU: 2000, Pods: 2, Scalar: map[corev1.ResourceName]int64{"example.com/gpu": 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requested (-want,+got):\n%s", diff)
	}
}

func TestPortConflict(t *testing.T) {
	ni := &NodeInfo{UsedPorts: sets.New("TCP/0.0.0.0/8080", "UDP/10.0.0.1/53")}
	tests := map[string]bool{
		"TCP/0.0.0.0/8080":  true,
		"TCP/10.0.0.2/8080": true, // wildcard in use covers every IP
		"UDP/0.0.0.0/53":    true, // a wildcard request clashes with any IP
		"UDP/10.0.0.2/53":   false,
		"TCP/0.0.0.0/53":    false,
		"TCP/0.0.0.0/9090":  false,
	}
	for port, want := range tests {
		if got := ni.PortConflict(port); got != want {
			t.Errorf("%s: want conflict=%v, got %v", port, want, got)
		}
	}
}

// TestClaimDevicesInternsLikeMakeDeviceID: the IDs ClaimDevices makes,
// interning a driver and pool once for the results that share them, are
// the IDs structured.MakeDeviceID makes one by one — with shares and admin
// access (left out) between results of other pools.
func TestClaimDevicesInternsLikeMakeDeviceID(t *testing.T) {
	share, admin := types.UID("s1"), true
	result := func(driver, pool, device string) resourcev1.DeviceRequestAllocationResult {
		return resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: pool, Device: device}
	}
	shared, adminAccess := result("gpu.example.com", "node-b", "gpu-9"), result("gpu.example.com", "node-a", "gpu-8")
	shared.ShareID, adminAccess.AdminAccess = &share, &admin
	tests := map[string]struct {
		results []resourcev1.DeviceRequestAllocationResult
		want    []structured.DeviceID
	}{
		"one pool": {
			results: []resourcev1.DeviceRequestAllocationResult{result("gpu.example.com", "node-a", "gpu-0"), result("gpu.example.com", "node-a", "gpu-1")},
			want:    []structured.DeviceID{structured.MakeDeviceID("gpu.example.com", "node-a", "gpu-0"), structured.MakeDeviceID("gpu.example.com", "node-a", "gpu-1")},
		},
		"pools and drivers interleaved, a share and admin access between them": {
			results: []resourcev1.DeviceRequestAllocationResult{
				result("gpu.example.com", "node-a", "gpu-0"), shared, result("gpu.example.com", "node-b", "gpu-1"),
				adminAccess, result("gpu.example.com", "node-a", "gpu-2"), result("nic.example.com", "node-a", "gpu-2"),
			},
			want: []structured.DeviceID{
				structured.MakeDeviceID("gpu.example.com", "node-a", "gpu-0"), structured.MakeDeviceID("gpu.example.com", "node-b", "gpu-1"),
				structured.MakeDeviceID("gpu.example.com", "node-a", "gpu-2"), structured.MakeDeviceID("nic.example.com", "node-a", "gpu-2"),
			},
		},
		"only a share": {results: []resourcev1.DeviceRequestAllocationResult{shared}, want: []structured.DeviceID{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &resourcev1.ResourceClaim{Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: tc.results}}}}
			got := ClaimDevices(c)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ClaimDevices = %v, want %v", got, tc.want)
			}
		})
	}
	sl := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "node-a"}}}
	if got, want := DevicesOf(sl).ID("gpu-3"), structured.MakeDeviceID("gpu.example.com", "node-a", "gpu-3"); got != want {
		t.Errorf("DevicesOf(slice).ID = %v, want %v", got, want)
	}
}
