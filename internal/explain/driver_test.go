package explain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A GPU pool after a driver upgrade: p5-0..2 publish their GPUs, p5-3 and
// p5-4 (same instance type) publish nothing; m5-0 is a CPU node.
const upgraded = `
nodePools:
- name: p5
  count: 3
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {node.kubernetes.io/instance-type: p5.48xlarge}
  devices: [{driver: gpu.example.com, count: 2}]
- name: p5x
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {node.kubernetes.io/instance-type: p5.48xlarge}
- name: m5
  count: 1
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {node.kubernetes.io/instance-type: m5.xlarge}
`

// Seed 003, step 3: the nodes a gang could use whose driver publishes no
// ResourceSlice are named with the driver — nodes of an instance type where
// the driver does publish, or every usable node when the pods select their
// nodes; a CPU node of another type is not blamed.
func TestMissingDriverNodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector map[string]string
		want     []string
	}{
		{name: "no node selection: the GPU pool's nodes without slices", want: []string{"p5x-0", "p5x-1"}},
		{name: "pods select the pool: every selected node without slices", selector: map[string]string{"node.kubernetes.io/instance-type": "p5.48xlarge"}, want: []string{"p5x-0", "p5x-1"}},
		{name: "pods select the CPU type: it is named", selector: map[string]string{"node.kubernetes.io/instance-type": "m5.xlarge"}, want: []string{"m5-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := builders.SnapshotInput(t, upgraded)
			claim := builders.Claim("ml", "r-0-gpu", "gpu.example.com", 1)
			in.Claims = append(in.Claims, claim)
			pod := builders.MakePod().Namespace("ml").Name("r-0").Claim("gpu", claim.Name).Obj()
			pod.Spec.NodeSelector = tc.selector
			snap := snapshot.New(in)
			members := []placement.Member{{Pod: pod}}
			drivers, missing := missingDrivers(ctx, snap, dra.NewCache(), "gpu.example.com", usableNodes(ctx, snap, members))
			if diff := cmp.Diff([]string{"gpu.example.com"}, drivers); diff != "" {
				t.Errorf("drivers (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, missing); diff != "" {
				t.Errorf("nodes without the driver's slices (-want,+got):\n%s", diff)
			}
		})
	}
}

// Seed 003, step 2: a node whose device plugin advertises capacity but no
// allocatable (its devices unhealthy, or not registered) is named.
func TestCapacityWithoutAllocatable(t *testing.T) {
	in := builders.SnapshotInput(t, upgraded)
	for _, n := range in.Nodes {
		n.Status.Capacity["example.com/gpu"] = resource.MustParse("8")
		n.Status.Allocatable["example.com/gpu"] = resource.MustParse("8")
	}
	in.Nodes[1].Status.Allocatable["example.com/gpu"] = resource.MustParse("0")
	in.Nodes[2].Status.Allocatable["example.com/gpu"] = resource.MustParse("6")
	pod := builders.MakePod().Namespace("ml").Name("r-0").Req("example.com/gpu", "1").Obj()
	ers := extendedResources(snapshot.New(in), []*corev1.Pod{pod})
	if len(ers) != 1 {
		t.Fatalf("extended resources %+v, want one", ers)
	}
	want := []string{in.Nodes[1].Name + ": capacity 8, allocatable 0", in.Nodes[2].Name + ": capacity 8, allocatable 6"}
	if diff := cmp.Diff(want, ers[0].NotAllocatable); diff != "" {
		t.Errorf("nodes not allocatable (-want,+got):\n%s", diff)
	}
}
