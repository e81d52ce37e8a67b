package simulate

import (
	"context"
	"runtime/debug"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/simulate/report"
)

// BenchmarkWeek is issue 26's speed figure: a week of 10,000 jobs
// (testdata/week: small research jobs, multi-node ones, production gangs
// that preempt) on 1,000 nodes × 8 GPUs, under all three schedulers at
// once, from the manifests read to the report built. Sub-benchmarks run
// each scheduler alone.
func BenchmarkWeek(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent)) // as the command runs
	cl, wl := load(b, "week")
	ctx := context.Background()
	b.Run("all", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, err := Run(ctx, cl, wl, Options{})
			if err != nil {
				b.Fatal(err)
			}
			checkRan(b, r)
		}
	})
	for _, m := range Models() {
		b.Run(m.Name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r, err := Run(ctx, cl, wl, Options{Models: []Model{m}})
				if err != nil {
					b.Fatal(err)
				}
				checkRan(b, r)
			}
		})
	}
}

func checkRan(b *testing.B, r *report.Report) {
	for _, s := range r.Schedulers {
		if s.JobsCompleted+s.JobsNeverStarted == 0 {
			b.Fatalf("%s: nothing ran", s.Name)
		}
		b.ReportMetric(float64(s.Decisions), s.Name+"-decisions")
	}
}
