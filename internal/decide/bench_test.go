package decide

import (
	"context"
	"fmt"
	"strings"
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

// benchCluster is benchNodes nodes × 8 DRA GPUs in 10 zones of 2 blocks of
// 5 racks (50 racks of 100 nodes, as upstream's topology benchmark); node
// i has i mod 8 of its GPUs (and 4 CPUs each) already taken, so free GPUs
// are scattered in runs of 1 to 8.
func benchCluster(b *testing.B) snapshot.Input {
	return builders.FragmentedRacks(b, benchNodes)
}

// benchGang is a gang of n one-GPU ranks (each with its own claim, as an
// Indexed Job with a ResourceClaimTemplate makes them), added to in.
func benchGang(in *snapshot.Input, name string, n int, topology ...string) (*lockv1.PodGroup, []*corev1.Pod) {
	return benchPods(in, name, n, true, topology...)
}

// benchPods is a gang of n ranks of 4 CPUs, with one GPU each when gpus.
func benchPods(in *snapshot.Input, name string, n int, gpus bool, topology ...string) (*lockv1.PodGroup, []*corev1.Pod) {
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
		b := builders.MakePod().Namespace("ml").Name(pn).Member(name).Req(corev1.ResourceCPU, "4")
		if !gpus {
			p := b.Obj()
			p.UID = types.UID(pn)
			in.Pods = append(in.Pods, p)
			pods = append(pods, p)
			continue
		}
		p := b.ClaimTemplate("gpu", "one-gpu").Obj()
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
// previous cycle's placement) and Decide for one gang, at 5,000 nodes in 50
// racks, 20 blocks and 10 zones: one-GPU ranks without topology, a 1,000-
// rank gang in one block (GPUs) and in one rack (4 CPUs each: no rack has
// 1,000 free GPUs), and an 8-rank gang preferring a rack within a zone.
func BenchmarkDecide(b *testing.B) {
	base := benchCluster(b)
	for _, tc := range []struct {
		size      int
		gpus      bool
		required  []string
		preferred []string
	}{
		{8, true, nil, nil}, {256, true, nil, nil}, {1000, true, nil, nil},
		{1000, true, []string{"example.com/block"}, nil},
		{1000, false, []string{"example.com/rack"}, nil},
		{8, true, []string{"topology.kubernetes.io/zone"}, []string{"example.com/rack"}},
	} {
		name := fmt.Sprintf("nodes=%d/gang=%d/gpus=%t/required=%v/preferred=%v", benchNodes, tc.size, tc.gpus, tc.required, tc.preferred)
		b.Run(name, func(b *testing.B) {
			in := base
			in.Claims = append([]*resourcev1.ResourceClaim(nil), base.Claims...)
			in.Pods = append([]*corev1.Pod(nil), base.Pods...)
			pg, pods := benchPods(&in, "g", tc.size, tc.gpus, tc.required...)
			if len(tc.preferred) > 0 {
				pg.Annotations = map[string]string{lockv1.PreferredTopologyAnnotation: strings.Join(tc.preferred, ",")}
			}
			st := &cycle.State{Cache: snapshot.CacheFrom(in), CEL: dra.NewCache(), Clock: clock.RealClock{}}
			ctx := klog.NewContext(context.Background(), klog.Background().V(0))
			key := queue.GroupKey("ml", pg.Name).String()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				u := podgroup.Resolve(pg, "ml", pg.Name, pods, nil)
				d := Decide(ctx, st.Snapshot(ctx, key, 0), st.CEL, Input{Unit: podgroup.Single(u)})
				if d.Kind != Bind || len(d.Result.Assignments) != tc.size {
					b.Fatalf("%s: placed %d of %d (%s)", d.Kind, len(d.Result.Assignments), tc.size, d.Summary)
				}
			}
		})
	}
}

// BenchmarkDecideManyGangs decides 100 gangs of 8 one-GPU ranks, each in
// one rack, one after the other on one cycle state (each placed gang
// assumed before the next, as the scheduler does): per op, all 100.
func BenchmarkDecideManyGangs(b *testing.B) {
	base := benchCluster(b)
	in := base
	in.Claims = append([]*resourcev1.ResourceClaim(nil), base.Claims...)
	in.Pods = append([]*corev1.Pod(nil), base.Pods...)
	type gang struct {
		pg   *lockv1.PodGroup
		pods []*corev1.Pod
	}
	var gangs []gang
	for g := 0; g < 100; g++ {
		pg, pods := benchGang(&in, fmt.Sprintf("g%03d", g), 8, "example.com/rack")
		gangs = append(gangs, gang{pg, pods})
	}
	ctx := klog.NewContext(context.Background(), klog.Background().V(0))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st := &cycle.State{Cache: snapshot.CacheFrom(in), CEL: dra.NewCache(), Clock: clock.RealClock{}}
		b.StartTimer()
		for _, g := range gangs {
			u := podgroup.Resolve(g.pg, "ml", g.pg.Name, g.pods, nil)
			d := Decide(ctx, st.Snapshot(ctx, queue.GroupKey("ml", g.pg.Name).String(), 0), st.CEL, Input{Unit: podgroup.Single(u)})
			if d.Kind != Bind {
				b.Fatalf("%s: %s %s", g.pg.Name, d.Kind, d.Summary)
			}
			for _, a := range d.Result.Assignments {
				st.Cache.AssumePod(a.Pod, a.Node, false)
				for _, c := range a.Claims {
					st.Cache.AssumeClaim(c, false)
				}
			}
		}
	}
}
