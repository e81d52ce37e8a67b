package preemption

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

const benchNodes = 5000

// fullCluster is 5,000 nodes × 8 DRA GPUs, every GPU held: node i runs an
// 8-rank gang (one GPU per rank) at priority 100, 200 or 300 (i mod 3),
// started i minutes ago. Each gang is one candidate (disruptionMode all).
func fullCluster(b *testing.B) (snapshot.Input, []Candidate) {
	in := builders.SnapshotInput(b, fmt.Sprintf(`
nodePools:
- name: gpu
  count: %d
  capacity: {cpu: "96", memory: 1Ti, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 8
`, benchNodes))
	now := time.Now()
	var cands []Candidate
	for i, n := range in.Nodes {
		c := Candidate{Name: fmt.Sprintf("PodGroup batch/g-%d", i), Priority: int32(100 * (1 + i%3)), Whole: true}
		for d := 0; d < 8; d++ {
			name := fmt.Sprintf("g-%d-%d", i, d)
			pod := builders.MakePod().Namespace("batch").Name(name).Node(n.Name).Req(corev1.ResourceCPU, "4").ClaimTemplate("gpu", "one-gpu").Obj()
			pod.UID = types.UID(name)
			pod.Status.StartTime = &metav1.Time{Time: now.Add(-time.Duration(i) * time.Minute)}
			claim := builders.Claim("batch", name+"-gpu", "gpu.example.com", 1)
			claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "dev", Driver: "gpu.example.com", Pool: n.Name, Device: fmt.Sprintf("gpu-%d", d),
			}}}}
			claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: pod.UID}}
			pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim.Name}}
			in.Pods = append(in.Pods, pod)
			in.Claims = append(in.Claims, claim)
			c.Pods = append(c.Pods, pod)
		}
		cands = append(cands, c)
	}
	return in, cands
}

// BenchmarkPreemption measures one preemption decision on a full cluster:
// build the snapshot, then search victims cluster-wide for a gang of
// priority 10000 with one GPU per rank.
func BenchmarkPreemption(b *testing.B) {
	base, cands := fullCluster(b)
	for _, size := range []int{16, 256} {
		b.Run(fmt.Sprintf("nodes=%d/gpus=8/candidates=%d/gang=%d", benchNodes, len(cands), size), func(b *testing.B) {
			in := base
			in.Claims = append([]*resourcev1.ResourceClaim(nil), base.Claims...)
			var members []placement.Member
			for i := 0; i < size; i++ {
				name := fmt.Sprintf("rank-%d", i)
				pod := builders.MakePod().Namespace("ml").Name(name).Req(corev1.ResourceCPU, "4").ClaimTemplate("gpu", "one-gpu").Obj()
				pod.UID = types.UID(name)
				claim := builders.Claim("ml", name+"-gpu", "gpu.example.com", 1)
				claim.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: name, UID: pod.UID}}
				in.Claims = append(in.Claims, claim)
				members = append(members, placement.Member{Pod: pod, Claims: []types.NamespacedName{{Namespace: "ml", Name: claim.Name}}})
			}
			cache := dra.NewCache()
			ctx := klog.NewContext(context.Background(), klog.Background().V(0))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap := snapshot.New(in)
				plan, why, err := Find(ctx, snap, dra.New(snap, cache), Input{Unit: placement.Unit{Members: members, MinCount: size, Gang: true}, Priority: 10000, Candidates: cands})
				if err != nil || plan == nil {
					b.Fatalf("no plan: %s %v", why, err)
				}
				if got, want := plan.VictimPods(), size; got != want {
					b.Fatalf("evicted %d pods, want %d", got, want)
				}
				b.ReportMetric(float64(plan.Simulations), "simulations/op")
			}
		})
	}
}
