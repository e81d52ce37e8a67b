package dra

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
)

// migSlices is one node of 2 partitionable GPUs (7 1g and 2 3g partitions
// each) beside 2 plain GPUs of another driver, and its classes.
func migSlices(t *testing.T) ([]*resourcev1.ResourceSlice, map[string]*resourcev1.DeviceClass) {
	t.Helper()
	c, err := clusterspec.Parse([]byte(`nodePools:
- name: a100
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes: {type: {string: gpu}}
    counters: {memory: 40Gi, slices: "7"}
    partitions:
    - {name: 1g, count: 7, attributes: {type: {string: mig}}, consumes: {memory: 5Gi, slices: "1"}}
    - {name: 3g, count: 2, attributes: {type: {string: mig}}, consumes: {memory: 20Gi, slices: "3"}}
  - driver: plain.example.com
    count: 2
deviceClasses:
- name: whole-gpu
  selectors: ['device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "gpu"']
- name: mig
  selectors: ['device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "mig"']
`))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := clusterspec.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]*resourcev1.DeviceClass{}
	for _, dc := range objs.DeviceClasses {
		classes[dc.Name] = dc
	}
	return objs.ResourceSlices, classes
}

func TestCountClassPartitionableDevices(t *testing.T) {
	slices, classes := migSlices(t)
	gpu := func(dev string) structured.DeviceID { return structured.MakeDeviceID("gpu.example.com", "a100-0", dev) }
	for _, tc := range []struct {
		name      string
		class     string
		allocated []structured.DeviceID
		want      string
	}{
		{name: "2 partitionable GPUs are 2 devices, not 20", class: "gpu.example.com", want: "2 devices, 0 in use"},
		{name: "partitions of a class: still 2 devices", class: "mig", want: "2 devices, 0 in use"},
		{name: "a 1g partition in use: its GPU is partly in use", class: "whole-gpu", allocated: []structured.DeviceID{gpu("gpu-0-1g-0")}, want: "2 devices, 0 in use, 1 partly in use (partitions)"},
		{name: "7 1g partitions use up a GPU", class: "mig", allocated: []structured.DeviceID{gpu("gpu-0-1g-0"), gpu("gpu-0-1g-1"), gpu("gpu-0-1g-2"), gpu("gpu-0-1g-3"), gpu("gpu-0-1g-4"), gpu("gpu-0-1g-5"), gpu("gpu-0-1g-6")}, want: "2 devices, 1 in use"},
		{name: "a whole GPU allocated uses it up", class: "mig", allocated: []structured.DeviceID{gpu("gpu-1")}, want: "2 devices, 1 in use"},
		{name: "plain devices are counted one by one", class: "plain.example.com", allocated: []structured.DeviceID{structured.MakeDeviceID("plain.example.com", "a100-0", "plain-0")}, want: "2 devices, 1 in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CountClassIn(context.Background(), NewCache(), classes[tc.class], slices, sets.New(tc.allocated...))
			if diff := cmp.Diff(tc.want, got.String()); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
