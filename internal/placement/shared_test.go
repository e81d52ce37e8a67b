package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// One node, one GPU with 80Gi of memory that several claims may share
// (allowMultipleAllocations: consumable capacity).
const sharedGPU = `
nodePools:
- name: node
  count: 1
  capacity: {cpu: "32", memory: 128Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 1
    capacity: {memory: 80Gi}
`

func sharedGPUInput(t *testing.T) snapshot.Input {
	in := cluster(t, sharedGPU)
	for _, s := range in.Slices {
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].AllowMultipleAllocations = ptr.To(true)
		}
	}
	return in
}

// memoryPods are n pods, each with its own claim for 40Gi of one GPU's memory.
func memoryPods(in *snapshot.Input, name string, n int, mem string) []Member {
	var ms []Member
	for i := 0; i < n; i++ {
		podName := fmt.Sprintf("%s-%d", name, i)
		pod := builders.MakePod().Namespace("ns").Name(podName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "slice").Obj()
		pod.UID = types.UID(podName)
		claim := builders.Claim("ns", podName+"-gpu", "gpu.example.com", 1)
		claim.Spec.Devices.Requests[0].Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)}}
		claim.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: podName, UID: pod.UID}}
		in.Claims = append(in.Claims, claim)
		ms = append(ms, Member{Pod: pod, Claims: []types.NamespacedName{{Namespace: "ns", Name: claim.Name}}})
	}
	return ms
}

func TestConsumableCapacity(t *testing.T) {
	tests := []struct {
		name       string
		pods       int
		mem        string
		wantPlaced int
	}{
		{name: "two 40Gi shares of one 80Gi GPU", pods: 2, mem: "40Gi", wantPlaced: 2},
		{name: "a third share does not fit", pods: 3, mem: "40Gi", wantPlaced: 0},
		{name: "more than the device has", pods: 1, mem: "81Gi", wantPlaced: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := sharedGPUInput(t)
			ms := memoryPods(&in, "p", tc.pods, tc.mem)
			snap := snapshot.New(in)
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: ms, MinCount: tc.pods, Gang: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Assignments) != tc.wantPlaced {
				t.Fatalf("placed %d, want %d (%v)", len(res.Assignments), tc.wantPlaced, res.Unplaced)
			}
			shares := map[types.UID]bool{}
			for _, a := range res.Assignments {
				r := a.Claims[0].Status.Allocation.Devices.Results[0]
				if r.ShareID == nil || shares[*r.ShareID] {
					t.Errorf("%s: share ID %v missing or given twice", a.Pod.Name, r.ShareID)
				} else {
					shares[*r.ShareID] = true
				}
			}
		})
	}
}

// What claims already allocated consume counts, in the next cycle's
// snapshot and after a claim is released (preemption's what-if).
func TestConsumableCapacityOfExistingClaims(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := sharedGPUInput(t)
	first := memoryPods(&in, "first", 1, "60Gi")
	snap := snapshot.New(in)
	res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: first})
	if err != nil || len(res.Assignments) != 1 {
		t.Fatalf("first: placed %d, err %v", len(res.Assignments), err)
	}
	held := res.Assignments[0].Claims[0]

	in2 := sharedGPUInput(t)
	second := memoryPods(&in2, "second", 1, "40Gi")
	in2.Claims = append(in2.Claims, held)
	snap2 := snapshot.New(in2)
	alloc := dra.New(snap2, dra.NewCache())
	if res, err := Simulate(ctx, snap2, alloc, Unit{Members: second}); err != nil || len(res.Assignments) != 0 {
		t.Fatalf("40Gi beside 60Gi of 80Gi: placed %d, err %v; want none", len(res.Assignments), err)
	}
	snap2.ReleaseClaim(held)
	if res, err := Simulate(ctx, snap2, alloc, Unit{Members: second}); err != nil || len(res.Assignments) != 1 {
		t.Fatalf("after the 60Gi share is released: placed %d, err %v; want 1", len(res.Assignments), err)
	}
}

// A claim allocated with admin access does not take its device from others
// (kube-scheduler does not count admin access as allocated).
func TestAdminAccessHoldsNoDevice(t *testing.T) {
	in := cluster(t, seed004)
	admin := builders.Claim("ns", "monitor", "gpu.example.com", 1)
	admin.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "dev", Driver: "gpu.example.com", Pool: "worker-0", Device: "gpu-0", AdminAccess: ptr.To(true)},
	}}}
	in.Claims = append(in.Claims, admin)
	snap := snapshot.New(in)
	if snap.Allocated.Len() != 0 || snap.Node("worker-0").FreeDevices() != 2 {
		t.Errorf("admin access holds devices: %d allocated, %d free on worker-0", snap.Allocated.Len(), snap.Node("worker-0").FreeDevices())
	}
}

// Devices with binding conditions are allocated (the binder waits for the
// conditions), and the allocation carries them.
func TestBindingConditionsAllocated(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, seed004)
	for _, s := range in.Slices {
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].BindingConditions = []string{"example.com/attached"}
			s.Spec.Devices[i].BindingFailureConditions = []string{"example.com/failed"}
		}
	}
	ms := gpuGang(&in, "p", 1, "1")
	snap := snapshot.New(in)
	res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: ms})
	if err != nil || len(res.Assignments) != 1 {
		t.Fatalf("placed %d, err %v", len(res.Assignments), err)
	}
	r := res.Assignments[0].Claims[0].Status.Allocation.Devices.Results[0]
	if len(r.BindingConditions) != 1 || len(r.BindingFailureConditions) != 1 {
		t.Errorf("allocation result %+v does not carry the device's binding conditions", r)
	}
}
