package snapshot

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
)

// A partitionable GPU counts once in FreeDevices, whole or partitioned, and
// is in use while any of its partitions is allocated.
func TestFreeDevicesCountsPartitionableDevicesOnce(t *testing.T) {
	c, err := clusterspec.Parse([]byte(`nodePools:
- name: a100
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
    counters: {memory: 40Gi, slices: "7"}
    partitions: [{name: 1g, count: 7, consumes: {memory: 5Gi, slices: "1"}}]
  - driver: nic.example.com
    count: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := clusterspec.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Input{Nodes: objs.Nodes, Slices: objs.ResourceSlices})
	ni := s.Node("a100-0")
	gpu := func(dev string) structured.DeviceID { return structured.MakeDeviceID("gpu.example.com", "a100-0", dev) }
	var got []int
	step := func(f func()) {
		f()
		got = append(got, ni.FreeDevices())
	}
	step(func() {})
	step(func() { s.Allocate(gpu("gpu-0-1g-0")) })
	step(func() { s.Allocate(gpu("gpu-0-1g-1")) })
	step(func() { s.Allocate(structured.MakeDeviceID("nic.example.com", "a100-0", "nic-0")) })
	step(func() { s.Release(gpu("gpu-0-1g-0")) })
	step(func() { s.Release(gpu("gpu-0-1g-1")) })
	step(func() { s.Allocate(gpu("gpu-1")) })
	// 2 GPUs and 2 NICs: a first partition takes gpu-0, a second on it
	// nothing more; a NIC is one; gpu-0 is free again only when its last
	// partition is released; gpu-1 whole is one.
	if diff := cmp.Diff([]int{4, 3, 3, 2, 2, 3, 2}, got); diff != "" {
		t.Errorf("FreeDevices after each step (-want,+got):\n%s", diff)
	}
}
