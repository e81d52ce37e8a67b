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

// partitionableGPUs is a node pool's 2 partitionable GPUs (7 1g and 2 3g
// partitions each), in a cluster spec's devices list.
const partitionableGPUs = `  - driver: gpu.example.com
    count: 2
    attributes: {type: {string: gpu}}
    counters: {memory: 40Gi, slices: "7"}
    partitions:
    - {name: 1g, count: 7, attributes: {type: {string: mig}}, consumes: {memory: 5Gi, slices: "1"}}
    - {name: 3g, count: 2, attributes: {type: {string: mig}}, consumes: {memory: 20Gi, slices: "3"}}
`

// gpuClasses are the classes of partitionableGPUs' whole GPUs and their
// partitions, in a cluster spec.
const gpuClasses = `deviceClasses:
- name: whole-gpu
  selectors: ['device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "gpu"']
- name: mig
  selectors: ['device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "mig"']
`

// render is the objects of a cluster spec.
func render(t *testing.T, spec string) *clusterspec.Objects {
	t.Helper()
	c, err := clusterspec.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := clusterspec.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// migSlices is one node of 2 partitionable GPUs beside 2 plain GPUs of
// another driver, and its classes.
func migSlices(t *testing.T) ([]*resourcev1.ResourceSlice, map[string]*resourcev1.DeviceClass) {
	t.Helper()
	objs := render(t, `nodePools:
- name: a100
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
`+partitionableGPUs+`  - driver: plain.example.com
    count: 2
`+gpuClasses)
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

// Counting remembers which devices a class matches by the class and device
// objects: the same objects count the same, and a device or class replaced
// by a changed object is judged again, never by what was remembered of
// its predecessor.
func TestCountRemembersMatchesByObject(t *testing.T) {
	slices, classes := migSlices(t)
	ctx, cel := context.Background(), NewCache()
	count := func(class *resourcev1.DeviceClass, slices []*resourcev1.ResourceSlice) string {
		return CountClassIn(ctx, cel, class, slices, nil).String()
	}
	whole := classes["whole-gpu"]
	if got := count(whole, slices); got != "2 devices, 0 in use" {
		t.Fatalf("first count: %s", got)
	}
	if got := count(whole, slices); got != "2 devices, 0 in use" {
		t.Errorf("the same objects counted again: %s, want 2 devices, 0 in use", got)
	}
	// A slice replaced: its GPUs are no longer of type gpu.
	changed := make([]*resourcev1.ResourceSlice, len(slices))
	for i, s := range slices {
		changed[i] = s
		if s.Spec.Driver != "gpu.example.com" {
			continue
		}
		c := s.DeepCopy()
		for j := range c.Spec.Devices {
			if a, ok := c.Spec.Devices[j].Attributes["type"]; ok && a.StringValue != nil && *a.StringValue == "gpu" {
				c.Spec.Devices[j].Attributes["type"] = resourcev1.DeviceAttribute{StringValue: new("retired")}
			}
		}
		changed[i] = c
	}
	if got := count(whole, changed); got != "0 devices, 0 in use" {
		t.Errorf("after the slice changed: %s, want 0 devices, 0 in use", got)
	}
	// The class replaced: it now matches every device of the driver.
	wider := whole.DeepCopy()
	wider.Spec.Selectors[0].CEL.Expression = `device.driver == "plain.example.com"`
	if got := count(wider, slices); got != "2 devices, 0 in use" {
		t.Errorf("the class changed: %s, want the 2 plain devices", got)
	}
	if got := count(classes["mig"], slices); got != "2 devices, 0 in use" {
		t.Errorf("another class on the same devices: %s, want 2 devices, 0 in use", got)
	}
}
