package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
)

// One reading of device requests: an exactly request's class and count (1
// when unset, 0 for All), a firstAvailable request's alternatives with the
// first choice's count and the fewest any alternative asks for; the classes
// each once, alternatives included; the least devices a spec can take.
func TestDemands(t *testing.T) {
	exact := func(class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: class, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: n}}
	}
	sub := func(class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceSubRequest {
		return resourcev1.DeviceSubRequest{Name: class, DeviceClassName: class, AllocationMode: mode, Count: n}
	}
	for name, tc := range map[string]struct {
		requests []resourcev1.DeviceRequest
		want     []Demand
		classes  []string
		least    int64
	}{
		"exact count": {requests: []resourcev1.DeviceRequest{exact("gpu", resourcev1.DeviceAllocationModeExactCount, 2)}, want: []Demand{{Classes: []string{"gpu"}, Count: 2, Least: 2}}, classes: []string{"gpu"}, least: 2},
		"count unset": {requests: []resourcev1.DeviceRequest{exact("gpu", "", 0)}, want: []Demand{{Classes: []string{"gpu"}, Count: 1, Least: 1}}, classes: []string{"gpu"}, least: 1},
		"all":         {requests: []resourcev1.DeviceRequest{exact("nic", resourcev1.DeviceAllocationModeAll, 0)}, want: []Demand{{Classes: []string{"nic"}, All: true}}, classes: []string{"nic"}},
		"alternatives": {
			requests: []resourcev1.DeviceRequest{{Name: "r", FirstAvailable: []resourcev1.DeviceSubRequest{sub("big", "", 4), sub("small", "", 2), sub("big", "", 8)}}},
			want:     []Demand{{Classes: []string{"big", "small", "big"}, Count: 4, Least: 2}}, classes: []string{"big", "small"}, least: 2,
		},
		"an All alternative": {
			requests: []resourcev1.DeviceRequest{{Name: "r", FirstAvailable: []resourcev1.DeviceSubRequest{sub("gpu", "", 1), sub("nic", resourcev1.DeviceAllocationModeAll, 0)}}},
			want:     []Demand{{Classes: []string{"gpu", "nic"}, Count: 1, Least: 0}}, classes: []string{"gpu", "nic"},
		},
		"several requests": {
			requests: []resourcev1.DeviceRequest{exact("gpu", "", 2), exact("nic", "", 1), exact("gpu", "", 1)},
			want:     []Demand{{Classes: []string{"gpu"}, Count: 2, Least: 2}, {Classes: []string{"nic"}, Count: 1, Least: 1}, {Classes: []string{"gpu"}, Count: 1, Least: 1}},
			classes:  []string{"gpu", "nic"}, least: 4,
		},
	} {
		t.Run(name, func(t *testing.T) {
			spec := &resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: tc.requests}}
			if d := cmp.Diff(tc.want, Demands(spec)); d != "" {
				t.Errorf("Demands (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.classes, Classes(spec)); d != "" {
				t.Errorf("Classes (-want,+got):\n%s", d)
			}
			if got := LeastDevices(spec); got != tc.least {
				t.Errorf("LeastDevices %d, want %d", got, tc.least)
			}
		})
	}
}
