package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// One node gets example.com/gpu from a device plugin (allocatable 2), one
// from DRA (4 devices of a class with extendedResourceName).
const mixedGPUs = `
nodePools:
- name: plugin
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110", example.com/gpu: "2"}
- name: dra
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 4
`

func extendedPods(name string, n int, gpus string) []Member {
	var ms []Member
	for i := 0; i < n; i++ {
		p := builders.MakePod().Namespace("ns").Name(fmt.Sprintf("%s-%d", name, i)).Req(corev1.ResourceCPU, "1").Req("example.com/gpu", gpus).Obj()
		p.UID = types.UID(p.Name)
		ms = append(ms, Member{Pod: p})
	}
	return ms
}

func withGPUClass(in snapshot.Input) snapshot.Input {
	in.Classes = append(in.Classes, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-ext", CreationTimestamp: metav1.Now()},
		Spec: resourcev1.DeviceClassSpec{
			Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}},
			ExtendedResourceName: ptr.To("example.com/gpu"),
		},
	})
	return in
}

func TestExtendedResourcesBackedByDRA(t *testing.T) {
	tests := []struct {
		name      string
		class     bool
		pods      int
		gpus      string
		perPod    int
		wantPlace int
		// wantOn: placed per node; wantClaims: assignments with a claim to create.
		wantOn     map[string]int
		wantClaims int
		wantReason string
	}{
		{name: "a gang of 6 uses the plugin's 2 and DRA's 4", class: true, pods: 6, gpus: "1", perPod: 1, wantPlace: 6, wantOn: map[string]int{"plugin-0": 2, "dra-0": 4}, wantClaims: 4},
		{name: "7 is more than both together", class: true, pods: 7, gpus: "1", perPod: 1, wantPlace: 0, wantReason: ReasonDevices},
		{name: "2 GPUs per pod: one on each node", class: true, pods: 3, gpus: "2", perPod: 2, wantPlace: 3, wantOn: map[string]int{"plugin-0": 1, "dra-0": 2}, wantClaims: 2},
		{name: "without the class only the plugin node serves it", pods: 3, gpus: "1", perPod: 1, wantPlace: 0, wantReason: "Insufficient example.com/gpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, mixedGPUs)
			if tc.class {
				in = withGPUClass(in)
			}
			snap := snapshot.New(in)
			ms := extendedPods("rank", tc.pods, tc.gpus)
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: ms, MinCount: tc.pods, Gang: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Assignments) != tc.wantPlace {
				t.Fatalf("placed %d, want %d (%v)", len(res.Assignments), tc.wantPlace, res.Unplaced)
			}
			if tc.wantPlace == 0 {
				if n := res.Unplaced[0].Diagnosis.Reasons[tc.wantReason]; n == 0 {
					t.Errorf("diagnosis %s does not name %q", res.Unplaced[0].Diagnosis, tc.wantReason)
				}
				return
			}
			on := placedOn(res)
			for node, n := range tc.wantOn {
				if on[node] != n {
					t.Errorf("placed on %v, want %v", on, tc.wantOn)
				}
			}
			devices := map[string]bool{}
			claims := 0
			for _, a := range res.Assignments {
				if a.Node == "plugin-0" {
					if a.Extended != nil {
						t.Errorf("%s on the device-plugin node got a claim", a.Pod.Name)
					}
					continue
				}
				if a.Extended == nil {
					t.Fatalf("%s on %s has no claim for its extended resource", a.Pod.Name, a.Node)
				}
				claims++
				c := a.Extended.Claim
				if c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" || dra.ExtendedClaimOwner(c) != a.Pod.UID || c.GenerateName != a.Pod.Name+"-extended-resources-" {
					t.Errorf("claim of %s: annotations %v, owner %q, generateName %q", a.Pod.Name, c.Annotations, dra.ExtendedClaimOwner(c), c.GenerateName)
				}
				if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != tc.perPod {
					t.Fatalf("claim of %s: allocation %v", a.Pod.Name, c.Status.Allocation)
				}
				for _, r := range c.Status.Allocation.Devices.Results {
					if r.Pool != a.Node || devices[r.Device] {
						t.Errorf("%s got device %s/%s (pool of another node, or given twice)", a.Pod.Name, r.Pool, r.Device)
					}
					devices[r.Device] = true
				}
				if len(a.Extended.Mappings) != 1 || a.Extended.Mappings[0].RequestName != c.Spec.Devices.Requests[0].Name {
					t.Errorf("mappings %v do not name the request %v", a.Extended.Mappings, c.Spec.Devices.Requests)
				}
			}
			if claims != tc.wantClaims {
				t.Errorf("%d claims to create, want %d", claims, tc.wantClaims)
			}
		})
	}
}

// A failed gang leaves no claim and no device assumed in the snapshot.
func TestExtendedResourcesRolledBack(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	snap := snapshot.New(withGPUClass(cluster(t, mixedGPUs)))
	claimsBefore, allocatedBefore := len(snap.Claims), snap.Allocated.Len()
	res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: extendedPods("rank", 7, "1"), MinCount: 7, Gang: true})
	if err != nil || len(res.Assignments) != 0 {
		t.Fatalf("placed %d, err %v; want none", len(res.Assignments), err)
	}
	if len(snap.Claims) != claimsBefore || snap.Allocated.Len() != allocatedBefore {
		t.Errorf("after rollback: %d claims, %d devices allocated; want %d, %d", len(snap.Claims), snap.Allocated.Len(), claimsBefore, allocatedBefore)
	}
}
