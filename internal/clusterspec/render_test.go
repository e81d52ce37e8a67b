package clusterspec

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestDefaultIsSeed004Shape(t *testing.T) {
	objs, err := Render(Default())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(objs.Nodes); got != 3 {
		t.Errorf("nodes: want 3, got %d", got)
	}
	if got := len(objs.ResourceSlices); got != 3 {
		t.Errorf("slices: want 3, got %d", got)
	}
	if got := objs.DeviceCount(); got != 6 {
		t.Errorf("devices: want 6, got %d", got)
	}
	var classes []string
	for _, c := range objs.DeviceClasses {
		classes = append(classes, c.Name)
	}
	if diff := cmp.Diff([]string{"gpu.example.com"}, classes); diff != "" {
		t.Errorf("device classes (-want,+got):\n%s", diff)
	}
	for _, s := range objs.ResourceSlices {
		if s.Spec.Pool.Name != *s.Spec.NodeName {
			t.Errorf("slice %s: pool %q must be the node name %q", s.Name, s.Spec.Pool.Name, *s.Spec.NodeName)
		}
	}
}

func TestExampleDefaultMatchesEmbedded(t *testing.T) {
	b, err := os.ReadFile("../../examples/clusters/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, DefaultYAML()) {
		t.Error("examples/clusters/default.yaml differs from internal/clusterspec/default.yaml; keep them identical")
	}
}

func TestExamplesParse(t *testing.T) {
	files, err := os.ReadDir("../../examples/clusters")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f.Name(), func(t *testing.T) {
			c, err := Load("../../examples/clusters/" + f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Render(c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRenderTemplates(t *testing.T) {
	spec := `
nodePools:
- name: rack
  count: 4
  nameTemplate: "gpu-node-{{.Index}}"
  capacity: {cpu: "64", memory: 512Gi, pods: "110", example.com/gpu: "8"}
  labels:
    example.com/rack: "rack-{{div .Index 2}}"
  taints:
  - {key: nvidia.com/gpu, value: "present", effect: NoSchedule}
  devices:
  - driver: gpu.example.com
    count: 4
    attributes:
      resource.kubernetes.io/pcieRoot: {string: "pci-{{div .Index 2}}"}
      index: {int: "{{.Index}}"}
      healthy: {bool: true}
      driverVersion: {version: "1.2.3"}
    capacity: {memory: 80Gi}
  - driver: nic.example.com
    count: 2
    nameTemplate: "eth{{.Index}}"
    attributes:
      resource.kubernetes.io/pcieRoot: {string: "pci-{{.Index}}"}
`
	c, err := Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := objs.Nodes[3].Name, "gpu-node-3"; got != want {
		t.Errorf("node name: want %q, got %q", want, got)
	}
	if got, want := objs.Nodes[3].Labels["example.com/rack"], "rack-1"; got != want {
		t.Errorf("rack label: want %q, got %q", want, got)
	}
	if got := objs.Nodes[0].Status.Allocatable["example.com/gpu"]; got.Cmp(resource.MustParse("8")) != 0 {
		t.Errorf("extended resource: want 8, got %s", got.String())
	}
	if diff := cmp.Diff([]corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}, objs.Nodes[0].Spec.Taints); diff != "" {
		t.Errorf("taints (-want,+got):\n%s", diff)
	}
	if got := len(objs.ResourceSlices); got != 8 {
		t.Fatalf("want one slice per node and driver (8), got %d", got)
	}
	gpus := objs.ResourceSlices[0]
	var roots []string
	for _, d := range gpus.Spec.Devices {
		roots = append(roots, *d.Attributes["resource.kubernetes.io/pcieRoot"].StringValue)
	}
	if diff := cmp.Diff([]string{"pci-0", "pci-0", "pci-1", "pci-1"}, roots); diff != "" {
		t.Errorf("pcieRoot per device (-want,+got):\n%s", diff)
	}
	d3 := gpus.Spec.Devices[3]
	want := resourcev1.Device{
		Name: "gpu-3",
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"resource.kubernetes.io/pcieRoot": {StringValue: strPtr("pci-1")},
			"index":                           {IntValue: int64Ptr(3)},
			"healthy":                         {BoolValue: boolPtr(true)},
			"driverVersion":                   {VersionValue: strPtr("1.2.3")},
		},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
	}
	if diff := cmp.Diff(want, d3); diff != "" {
		t.Errorf("device gpu-3 (-want,+got):\n%s", diff)
	}
	if got := objs.ResourceSlices[1].Spec.Devices[1].Name; got != "eth1" {
		t.Errorf("nic name: want eth1, got %q", got)
	}
	if got := len(objs.DeviceClasses); got != 2 {
		t.Errorf("want a DeviceClass per driver (2), got %d", got)
	}
}

// A partitionable GPU (MIG): each device has its counter set and consumes
// all of it whole; its partitions consume their share, inherit its
// attributes and are published in the same pool.
func TestRenderPartitions(t *testing.T) {
	c, err := Parse([]byte(`nodePools:
- name: a100
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes: {resource.kubernetes.io/pcieRoot: {string: "pci-{{.Index}}"}}
    capacity: {memory: 40Gi}
    counters: {memory: 40Gi, slices: "7"}
    partitions:
    - name: 1g
      count: 7
      attributes: {profile: {string: 1g.5gb}}
      capacity: {memory: 5Gi}
      consumes: {memory: 5Gi, slices: "1"}
    - name: 3g
      count: 2
      consumes: {memory: 20Gi, slices: "3"}
`))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range objs.ResourceSlices {
		got = append(got, fmt.Sprintf("%s pool=%s/%d sets=%d devices=%d", s.Name, s.Spec.Pool.Name, s.Spec.Pool.ResourceSliceCount, len(s.Spec.SharedCounters), len(s.Spec.Devices)))
	}
	want := []string{
		"a100-0-gpu.example.com-counters-0 pool=a100-0/2 sets=2 devices=0",
		"a100-0-gpu.example.com pool=a100-0/2 sets=0 devices=20",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("slices (-want,+got):\n%s", diff)
	}
	devs := objs.ResourceSlices[1].Spec.Devices
	whole, slice, big := devs[0], devs[1], devs[8]
	if diff := cmp.Diff([]string{"gpu-0", "gpu-0-1g-0", "gpu-0-3g-0"}, []string{whole.Name, slice.Name, big.Name}); diff != "" {
		t.Errorf("device names (-want,+got):\n%s", diff)
	}
	consumes := func(d resourcev1.Device) string {
		c := d.ConsumesCounters[0]
		mem, slices := c.Counters["memory"].Value, c.Counters["slices"].Value
		return fmt.Sprintf("%s memory=%s slices=%s", c.CounterSet, mem.String(), slices.String())
	}
	if diff := cmp.Diff([]string{"gpu-0-counters memory=40Gi slices=7", "gpu-0-counters memory=5Gi slices=1", "gpu-0-counters memory=20Gi slices=3"},
		[]string{consumes(whole), consumes(slice), consumes(big)}); diff != "" {
		t.Errorf("consumption (-want,+got):\n%s", diff)
	}
	if got := *slice.Attributes["resource.kubernetes.io/pcieRoot"].StringValue + " " + *slice.Attributes["profile"].StringValue; got != "pci-0 1g.5gb" {
		t.Errorf("a partition inherits its device's attributes and adds its own: got %q", got)
	}
	if got := devs[10].Name + " " + *devs[10].Attributes["resource.kubernetes.io/pcieRoot"].StringValue; got != "gpu-1 pci-1" {
		t.Errorf("second device: got %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	base := "nodePools:\n- name: a\n  count: 1\n  capacity: {cpu: '1', memory: 1Gi, pods: '10'}\n"
	tests := map[string]struct {
		spec    string
		wantErr string
	}{
		"unknown field": {
			spec:    base + "  gpus: 3\n",
			wantErr: `unknown field "gpus"`,
		},
		"no pools": {
			spec:    "name: x\n",
			wantErr: "nodePools: Required value",
		},
		"missing cpu": {
			spec:    "nodePools:\n- name: a\n  count: 1\n  capacity: {memory: 1Gi, pods: '10'}\n",
			wantErr: "nodePools[0].capacity[cpu]: Required value",
		},
		"duplicate node names": {
			spec:    base + "- name: b\n  count: 1\n  nameTemplate: a-0\n  capacity: {cpu: '1', memory: 1Gi, pods: '10'}\n",
			wantErr: `a-0\" also produced by nodePools[0]`,
		},
		"bad template": {
			spec:    base + "  labels: {rack: '{{.Rack}}'}\n",
			wantErr: "nodePools[0].labels[rack]",
		},
		"two attribute values": {
			spec:    base + "  devices:\n  - driver: gpu.example.com\n    count: 1\n    attributes: {x: {string: a, int: 1}}\n",
			wantErr: "exactly one of string, int, bool, version",
		},
		"int attribute not a number": {
			spec:    base + "  devices:\n  - driver: gpu.example.com\n    count: 1\n    attributes: {x: {int: abc}}\n",
			wantErr: "not an integer",
		},
		"bad taint effect": {
			spec:    base + "  taints: [{key: a, effect: Sometimes}]\n",
			wantErr: "nodePools[0].taints[0].effect: Unsupported value",
		},
		"bad driver": {
			spec:    base + "  devices:\n  - driver: GPU_Driver\n    count: 1\n",
			wantErr: "nodePools[0].devices[0].driver",
		},
		"partitions without counters": {
			spec:    base + "  devices:\n  - driver: gpu.example.com\n    count: 1\n    partitions: [{name: 1g, count: 7, consumes: {slices: '1'}}]\n",
			wantErr: "nodePools[0].devices[0].counters: Required value",
		},
		"a partition consuming a counter the device lacks": {
			spec:    base + "  devices:\n  - driver: gpu.example.com\n    count: 1\n    counters: {slices: '7'}\n    partitions: [{name: 1g, count: 7, consumes: {memory: 10Gi}}]\n",
			wantErr: "nodePools[0].devices[0].partitions[0].consumes[memory]: Unsupported value",
		},
		"a counter name that is no DNS label": {
			spec:    base + "  devices:\n  - driver: gpu.example.com\n    count: 1\n    counters: {Memory_GB: '80'}\n",
			wantErr: "nodePools[0].devices[0].counters[Memory_GB]",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.spec))
			if err == nil {
				t.Fatalf("want error containing %q, got none", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("want error containing %q, got %v", tc.wantErr, err)
			}
		})
	}
}

func strPtr(s string) *string { return &s }
func int64Ptr(n int64) *int64 { return &n }
func boolPtr(b bool) *bool    { return &b }
