package explain

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

const benchNodes = 5000

// BenchmarkWhatIf is `explain -f` in memory at 5,000 nodes × 8 GPUs in 10
// zones of 2 blocks of 5 racks (node i with i mod 8 GPUs taken, as
// internal/decide's benchmark): the manifest read (workload.Load), its pods
// and claims made, its gang resolved and decided — everything but the
// watch of the cluster, which the command pays once. One op is one answer.
func BenchmarkWhatIf(b *testing.B) {
	in := builders.FragmentedRacks(b, benchNodes)
	st := &state{cycle: &cycle.State{Cache: snapshot.CacheFrom(in), CEL: dra.NewCache(), Clock: clock.RealClock{}},
		nodes: len(in.Nodes), pods: in.Pods, groups: map[string]*lockv1.PodGroup{}, composites: map[string]*lockv1.CompositePodGroup{}}
	template := `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com, count: 1}
---
`
	ctx := klog.NewContext(context.Background(), klog.Background().V(0))
	for _, tc := range []struct {
		ranks    int
		topology string
		verdict  string
	}{
		{8, `scheduling.lockstep.dev/required-topology: topology.kubernetes.io/zone, scheduling.lockstep.dev/preferred-topology: example.com/rack`, Fits},
		{1000, `scheduling.lockstep.dev/required-topology: example.com/block`, Fits},
		{1000, `scheduling.lockstep.dev/required-topology: example.com/rack`, DoesNotFit},
	} {
		b.Run(fmt.Sprintf("nodes=%d/ranks=%d/%s", benchNodes, tc.ranks, tc.verdict), func(b *testing.B) {
			job := template + whatIfJob("train", tc.ranks, tc.topology, "      schedulerName: lockstep\n      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]")
			src := []workload.Source{{Name: "job.yaml", Data: []byte(job)}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				wl, err := workload.Load(src, workload.LoadOptions{Live: true, Namespace: "ml"})
				if err != nil {
					b.Fatal(err)
				}
				j, err := oneJob(wl)
				if err != nil {
					b.Fatal(err)
				}
				if r, err := st.whatIf(ctx, wl, j, st.cycle.Clock.Now()); err != nil || r.Verdict != tc.verdict {
					b.Fatalf("%+v (%v), want %s", r, err, tc.verdict)
				}
			}
		})
	}
}
