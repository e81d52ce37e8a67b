package decide

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// BenchmarkDecideHugeGangThatCannotFit is the cycle of the stall bench's
// huge gang (test/bench/stall): n one-CPU ranks, minCount n, on 16 nodes ×
// 64 CPUs — it never fits; what one cycle deciding so costs the queue.
func BenchmarkDecideHugeGangThatCannotFit(b *testing.B) {
	for _, n := range []int{3000, 10000} {
		b.Run(fmt.Sprint("ranks=", n), func(b *testing.B) {
			in := builders.SnapshotInput(b, `
nodePools:
- name: gpu
  count: 16
  capacity: {cpu: "64", memory: 512Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 8
`)
			pg := builders.GangPodGroup("ml", "huge", int32(n))
			var pods []*corev1.Pod
			for i := 0; i < n; i++ {
				p := builders.MakePod().Namespace("ml").Name(fmt.Sprintf("huge-%d", i)).Member("huge").Req(corev1.ResourceCPU, "1").Obj()
				p.UID = types.UID(p.Name)
				pods = append(pods, p)
				in.Pods = append(in.Pods, p)
			}
			st := &cycle.State{Cache: snapshot.CacheFrom(in), CEL: dra.NewCache(), Clock: clock.RealClock{}}
			ctx := klog.NewContext(context.Background(), klog.Background().V(0))
			key := queue.GroupKey("ml", pg.Name).String()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				u := podgroup.Resolve(pg, "ml", pg.Name, pods, nil)
				d := Decide(ctx, st.Snapshot(ctx, key, 0), st.CEL, Input{Unit: podgroup.Single(u)})
				if d.Kind == Bind {
					b.Fatalf("the huge gang fit: %s", d.Summary)
				}
			}
		})
	}
}
