package dra

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// answersCluster is 2 nodes of 4 plain GPUs, 1 of 2 partitionable GPUs
// (7 1g and 2 3g partitions each) and 1 of 140 small devices (more than a
// key's first 128 bits), and their classes.
func answersCluster(t *testing.T) snapshot.Input {
	t.Helper()
	objs := render(t, `nodePools:
- name: plain
  count: 2
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: plain.example.com
    count: 4
- name: many
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: small.example.com
    count: 140
- name: a100
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
`+partitionableGPUs+gpuClasses)
	return snapshot.Input{Features: features.Default(), Nodes: objs.Nodes, Slices: objs.ResourceSlices, Classes: objs.DeviceClasses}
}

// claimOf is an unallocated claim named name asking for count devices of
// each class.
func claimOf(name string, count int64, classes ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name)}}
	for i, class := range classes {
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{
			Name:    fmt.Sprintf("r%d", i),
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count},
		})
	}
	return c
}

// An allocator that remembers its answers gives, at every step of a run of
// allocations and releases on one snapshot, exactly the answer a fresh
// allocator gives (the structured allocator's own), and remembers enough
// to answer many of the questions without it.
func TestAllocateRemembersOnlyTheAllocatorsOwnAnswers(t *testing.T) {
	ctx := context.Background()
	snap := snapshot.New(answersCluster(t))
	cache := NewCache()
	remembering := New(snap, cache)
	asks := []func(i int) []*resourcev1.ResourceClaim{
		func(i int) []*resourcev1.ResourceClaim {
			return []*resourcev1.ResourceClaim{claimOf(fmt.Sprint("one-", i), 1, "plain.example.com")}
		},
		func(i int) []*resourcev1.ResourceClaim {
			return []*resourcev1.ResourceClaim{claimOf(fmt.Sprint("three-", i), 3, "plain.example.com")}
		},
		func(i int) []*resourcev1.ResourceClaim {
			return []*resourcev1.ResourceClaim{claimOf(fmt.Sprint("gpu-", i), 1, "whole-gpu")}
		},
		func(i int) []*resourcev1.ResourceClaim {
			return []*resourcev1.ResourceClaim{claimOf(fmt.Sprint("mig-", i), 2, "mig")}
		},
		func(i int) []*resourcev1.ResourceClaim {
			return []*resourcev1.ResourceClaim{claimOf(fmt.Sprint("pair-", i), 1, "mig", "plain.example.com"), claimOf(fmt.Sprint("more-", i), 1, "plain.example.com")}
		},
		func(i int) []*resourcev1.ResourceClaim {
			return []*resourcev1.ResourceClaim{claimOf(fmt.Sprint("small-", i), 3, "small.example.com")}
		},
		func(i int) []*resourcev1.ResourceClaim {
			return []*resourcev1.ResourceClaim{claimOf(fmt.Sprint("smalls-", i), 30, "small.example.com")}
		},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var held []*resourcev1.ResourceClaim
	remembered := 0
	for i := range 800 {
		node := snap.Nodes[rng.IntN(len(snap.Nodes))]
		claims := asks[rng.IntN(len(asks))](i)
		key, ok := remembering.answers.key(snap, node, claims)
		if !ok {
			t.Fatalf("step %d: plain and partitionable devices must be remembered", i)
		}
		if _, known := remembering.answers.known[key]; known {
			remembered++
		}
		got, err := remembering.Allocate(ctx, node, claims)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		want, err := New(snap, cache).Allocate(ctx, node, claims)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("step %d, %s on %s: the remembered answer is not the allocator's (-allocator,+remembered):\n%s", i, claims[0].Name, node.Node.Name, diff)
		}
		switch {
		case got != nil && rng.IntN(3) > 0:
			for j, c := range claims {
				cp := c.DeepCopy()
				cp.Status.Allocation = &got[j]
				snap.HoldClaim(cp)
				held = append(held, cp)
			}
		case len(held) > 0 && rng.IntN(2) == 0:
			j := rng.IntN(len(held))
			snap.ReleaseClaim(held[j])
			held = append(held[:j], held[j+1:]...)
		}
	}
	if remembered < 100 {
		t.Errorf("%d of 800 answers were remembered ones: the memory does not serve the questions it is for", remembered)
	}
}

// What the key does not describe is never remembered: devices that allow
// several allocations (their shares and consumed capacity; each answer
// names a new share) and slices outside any node.
func TestAllocateDoesNotRememberWhatItsKeyDoesNotDescribe(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(in *snapshot.Input)
	}{
		{name: "a device allows several allocations", change: func(in *snapshot.Input) {
			in.Features.Allocator.ConsumableCapacity = true
			for _, s := range in.Slices {
				if s.Spec.Driver == "plain.example.com" {
					s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
				}
			}
		}},
		{name: "a slice serves every node", change: func(in *snapshot.Input) {
			in.Slices = append(in.Slices, &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "fabric"},
				Spec: resourcev1.ResourceSliceSpec{Driver: "fabric.example.com", Pool: resourcev1.ResourcePool{Name: "fabric", ResourceSliceCount: 1},
					AllNodes: ptr.To(true), Devices: []resourcev1.Device{{Name: "link-0"}}},
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := answersCluster(t)
			tc.change(&in)
			snap := snapshot.New(in)
			a := New(snap, NewCache())
			node := snap.Node("plain-0")
			// Each twice: one that fits, one that cannot (5 devices of 4).
			for i, count := range []int64{1, 1, 5, 5} {
				got, err := a.Allocate(ctx, node, []*resourcev1.ResourceClaim{claimOf(fmt.Sprint("ask-", i), count, "plain.example.com")})
				if err != nil || (got == nil) != (count == 5) {
					t.Fatalf("ask %d for %d devices: %v, %v", i, count, got, err)
				}
			}
			if n := len(a.answers.known); n != 0 {
				t.Errorf("%d answers remembered, want none", n)
			}
		})
	}
}

// A node's devices past the first 128 are in the key as the first are: a
// device freed there is offered again, not the answer remembered from
// before.
func TestAllocateKeysDevicesPastTheFirst128(t *testing.T) {
	ctx := context.Background()
	snap := snapshot.New(answersCluster(t))
	node := snap.Node("many-0")
	var ids []structured.DeviceID
	for _, sl := range node.Slices {
		for _, d := range sl.Spec.Devices {
			ids = append(ids, snapshot.DevicesOf(sl).ID(d.Name))
		}
	}
	if len(ids) != 140 {
		t.Fatalf("node many-0 has %d devices, want 140", len(ids))
	}
	a := New(snap, NewCache())
	ask := func(step string) string {
		got, err := a.Allocate(ctx, node, []*resourcev1.ResourceClaim{claimOf(step, 1, "small.example.com")})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v, %v", step, got, err)
		}
		want, err := New(snap, NewCache()).Allocate(ctx, node, []*resourcev1.ResourceClaim{claimOf(step, 1, "small.example.com")})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: the remembered answer is not the allocator's (-allocator,+remembered):\n%s", step, diff)
		}
		return got[0].Devices.Results[0].Device
	}
	snap.Allocate(ids[:131]...)
	first := ask("all but 9 in use")
	snap.Release(ids[129])
	if second := ask("one past 128 freed"); second == first {
		t.Errorf("after freeing a device past the first 128, the answer is still %s", first)
	}
}

// A share held on a device counts it in use even when its slice no longer
// allows several allocations (a partition's counters with it): while any
// share is held nothing is remembered, and the share released frees the
// devices at once.
func TestAllocateRemembersNothingWhileADeviceIsShared(t *testing.T) {
	ctx := context.Background()
	snap := snapshot.New(answersCluster(t))
	node := snap.Node("a100-0")
	stale := claimOf("stale-shares", 1, "mig")
	stale.Status.Allocation = &resourcev1.AllocationResult{}
	for _, sl := range node.Slices {
		for _, d := range sl.Spec.Devices {
			if len(d.ConsumesCounters) > 0 && strings.Contains(d.Name, "g-") {
				stale.Status.Allocation.Devices.Results = append(stale.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
					Request: "r0", Driver: sl.Spec.Driver, Pool: sl.Spec.Pool.Name, Device: d.Name, ShareID: ptr.To(types.UID("share-" + d.Name)),
				})
			}
		}
	}
	if n := len(stale.Status.Allocation.Devices.Results); n != 18 {
		t.Fatalf("%d partitions shared, want 18", n)
	}
	a := New(snap, NewCache())
	ask := func(step string) []resourcev1.AllocationResult {
		claims := []*resourcev1.ResourceClaim{claimOf(step, 2, "whole-gpu")}
		got, err := a.Allocate(ctx, node, claims)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		want, err := New(snap, NewCache()).Allocate(ctx, node, claims)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: the remembered answer is not the allocator's (-allocator,+remembered):\n%s", step, diff)
		}
		return got
	}
	snap.HoldClaim(stale)
	if got := ask("shares held"); got != nil {
		t.Fatalf("2 whole GPUs fit while every partition is shared: %v", got)
	}
	snap.ReleaseClaim(stale)
	if got := ask("shares released"); got == nil {
		t.Error("2 whole GPUs do not fit once the shares are released")
	}
}
