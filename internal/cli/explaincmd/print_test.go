package explaincmd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/explain"
)

func TestPrintReportLists(t *testing.T) {
	r := &explain.Report{Answer: "waiting", Devices: []explain.ClassReport{{Class: "gpu", Exists: true, Total: 30, Allocated: 30}}}
	for i := 0; i < 15; i++ {
		r.Devices[0].PerNode = append(r.Devices[0].PerNode, explain.NodeDevice{Node: fmt.Sprintf("node-%02d", i), Matching: 2, Allocated: 2})
	}
	r.Devices[0].Tainted = []string{"node-00/gpu-0 NoSchedule:broken="}
	for _, tc := range []struct {
		wide      bool
		nodes     int
		more      string
		lastShown string
	}{
		{wide: false, nodes: 10, more: "… 5 more nodes with matching devices (-o wide lists them)", lastShown: "node-09"},
		{wide: true, nodes: 15, lastShown: "node-14"},
	} {
		t.Run(fmt.Sprintf("wide=%v", tc.wide), func(t *testing.T) {
			var out bytes.Buffer
			printReport(&out, r, tc.wide)
			s := out.String()
			if got := strings.Count(s, " matching, "); got != tc.nodes {
				t.Errorf("%d node lines, want %d:\n%s", got, tc.nodes, s)
			}
			if !strings.Contains(s, tc.lastShown+":") {
				t.Errorf("%s not listed:\n%s", tc.lastShown, s)
			}
			if tc.more != "" && !strings.Contains(s, tc.more) {
				t.Errorf("want %q:\n%s", tc.more, s)
			}
			if tc.more == "" && strings.Contains(s, "more nodes") {
				t.Errorf("wide output says entries were left out:\n%s", s)
			}
			if !strings.Contains(s, "tainted: node-00/gpu-0") || strings.Contains(s, "more tainted") {
				t.Errorf("a list under the limit is printed whole:\n%s", s)
			}
		})
	}
}

func TestPrintDeviceHealth(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    explain.Report
		want string
	}{
		{name: "nothing reported: no line", want: ""},
		{name: "all healthy", r: explain.Report{HealthyDevices: 4}, want: "   Device health (kubelet): 4 Healthy\n"},
		{name: "one unhealthy", r: explain.Report{HealthyDevices: 3, DeviceHealth: []dra.DeviceHealth{
			{Pod: "train-1", Resource: "claim:train-1-gpu/gpu", Device: "gpu.example.com/node-1/gpu-3", Health: corev1.ResourceHealthStatusUnhealthy, Message: "XID 79"}}},
			want: "   Device health (kubelet): 3 Healthy, 1 not:\n   train-1: device gpu.example.com/node-1/gpu-3 (claim:train-1-gpu/gpu) is Unhealthy: XID 79\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			printDeviceHealth(&out, &tc.r, false)
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// The driver and device-plugin evidence (seed 003, steps 2 and 3) is
// printed with what to check.
func TestPrintDriverEvidence(t *testing.T) {
	r := &explain.Report{Answer: "waiting",
		ExtendedResources: []explain.ExtendedResource{{Name: "nvidia.com/gpu", PerPod: 8, NotAllocatable: []string{"ip-10-0-1-7: capacity 8, allocatable 0"}}},
		Devices:           []explain.ClassReport{{Class: "gpu.nvidia.com", Exists: true, Drivers: []string{"gpu.nvidia.com"}, NoSlices: []string{"ip-10-0-1-8", "ip-10-0-1-9"}}},
	}
	var out bytes.Buffer
	printReport(&out, r, false)
	for _, want := range []string{
		"1 nodes advertise capacity but not allocatable (the device plugin reports those devices unhealthy",
		"   ip-10-0-1-7: capacity 8, allocatable 0",
		"2 nodes the pending pods could use publish no ResourceSlice from gpu.nvidia.com (its kubelet plugin DaemonSet is missing or not ready there",
		"ip-10-0-1-8, ip-10-0-1-9",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("want %q in:\n%s", want, out.String())
		}
	}
}

// The what-if prints its answer, each unit and where it would go, what a
// preemption would evict, the notes, and that nothing was created.
func TestPrintWhatIf(t *testing.T) {
	r := &explain.WhatIfReport{Answer: "Job ml/train would fit if created, after the scheduler preempts: would evict pod other/busy-0", Job: "Job ml/train",
		Verdict: explain.FitsAfterPreemption, Nodes: 4, Preemption: "would evict pod other/busy-0 (1 pods, priority 0)",
		Units: []explain.WhatIfUnit{{Name: "PodGroup ml/train", Pods: 4, MinCount: 4, Placeable: 4, NodeCount: 2, Where: []string{"example.com/rack=r1"}}},
		Notes: []string{"Job ml/train is suspended"}}
	var out bytes.Buffer
	printWhatIf(&out, r, false)
	want := `Job ml/train would fit if created, after the scheduler preempts: would evict pod other/busy-0

UNIT               PODS  MINCOUNT  PLACEABLE  NODES  WHERE
PodGroup ml/train  4     4         4          2      example.com/rack=r1
Preemption: would evict pod other/busy-0 (1 pods, priority 0)
Note: Job ml/train is suspended
Nothing was created.
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
