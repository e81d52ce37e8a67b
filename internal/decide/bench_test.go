package decide

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

const benchNodes = 5000

// benchCluster is benchNodes nodes × 8 DRA GPUs in 10 zones of 5 blocks of
// 10 racks (10 nodes a rack); node i has i mod 8 of its GPUs (and 4 CPUs
// each) already taken, so free GPUs are scattered in runs of 1 to 8.
func benchCluster(b *testing.B) snapshot.Input {
	in := builders.SnapshotInput(b, fmt.Sprintf(`
nodePools:
- name: gpu
  count: %d
  capacity: {cpu: "96", memory: 1Ti, pods: "110"}
  labels:
    topology.kubernetes.io/zone: "zone-{{div .Index 500}}"
    example.com/block: "block-{{div .Index 100}}"
    example.com/rack: "rack-{{div .Index 10}}"
  devices:
  - driver: gpu.example.com
    count: 8
`, benchNodes))
	for i, n := range in.Nodes {
		for d := 0; d < i%8; d++ {
			name := fmt.Sprintf("busy-%d-%d", i, d)
			claim := builders.Claim("other", name, "gpu.example.com", 1)
			claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "dev", Driver: "gpu.example.com", Pool: n.Name, Device: fmt.Sprintf("gpu-%d", d),
			}}}}
			in.Claims = append(in.Claims, claim)
			in.Pods = append(in.Pods, builders.MakePod().Namespace("other").Name(name).Node(n.Name).Req(corev1.ResourceCPU, "4").Obj())
		}
	}
	return in
}

// benchGang is a gang of n one-GPU ranks (each with its own claim, as an
// Indexed Job with a ResourceClaimTemplate makes them), added to in.
func benchGang(in *snapshot.Input, name string, n int, topology ...string) (*lockv1.PodGroup, []*corev1.Pod) {
	pg := builders.GangPodGroup("ml", name, int32(n))
	for _, k := range topology {
		if pg.Spec.SchedulingConstraints == nil {
			pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
		}
		pg.Spec.SchedulingConstraints.Topology = append(pg.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
	}
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		pn := fmt.Sprintf("%s-%d", name, i)
		p := builders.MakePod().Namespace("ml").Name(pn).Member(name).Req(corev1.ResourceCPU, "4").ClaimTemplate("gpu", "one-gpu").Obj()
		p.UID = types.UID(pn)
		claim := builders.Claim("ml", pn+"-gpu", "gpu.example.com", 1)
		claim.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: pn, UID: p.UID, Controller: ptr.To(true)}}
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
		in.Claims = append(in.Claims, claim)
		in.Pods = append(in.Pods, p)
		pods = append(pods, p)
	}
	return pg, pods
}

// BenchmarkDecide is one scheduling cycle as the scheduler runs it: the
// cycle state's snapshot (internal/cycle, brought up to date from the
// previous cycle's placement) and Decide for one gang of one-GPU ranks, at
// 5,000 nodes, with and without a topology constraint.
func BenchmarkDecide(b *testing.B) {
	base := benchCluster(b)
	for _, tc := range []struct {
		size     int
		topology []string
	}{
		{8, nil}, {256, nil}, {1000, nil},
		{8, []string{"example.com/rack"}},
		{1000, []string{"topology.kubernetes.io/zone"}},
	} {
		name := fmt.Sprintf("nodes=%d/gang=%d/topology=%v", benchNodes, tc.size, tc.topology)
		b.Run(name, func(b *testing.B) {
			in := base
			in.Claims = append([]*resourcev1.ResourceClaim(nil), base.Claims...)
			in.Pods = append([]*corev1.Pod(nil), base.Pods...)
			pg, pods := benchGang(&in, "g", tc.size, tc.topology...)
			st := &cycle.State{Cache: snapshot.CacheFrom(in), CEL: dra.NewCache(), Clock: clock.RealClock{}}
			ctx := klog.NewContext(context.Background(), klog.Background().V(0))
			key := queue.GroupKey("ml", pg.Name).String()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				u := podgroup.Resolve(pg, "ml", pg.Name, pods, nil)
				d := Decide(ctx, st.Snapshot(ctx, key, 0), st.CEL, Input{Unit: u})
				if d.Kind != Bind || len(d.Result.Assignments) != tc.size {
					b.Fatalf("%s: placed %d of %d (%s)", d.Kind, len(d.Result.Assignments), tc.size, d.Summary)
				}
			}
		})
	}
}
