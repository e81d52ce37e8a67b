package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// BenchmarkPop measures one pop (and the re-add of the popped unit) with n
// units active. The order function counts its calls: the scheduler's
// resolves a PodGroup from the informer cache per call.
func BenchmarkPop(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("active=%d", n), func(b *testing.B) {
			base := time.Unix(1000, 0)
			calls := 0
			q := New(clocktesting.NewFakeClock(base), func(k Key) (int32, time.Time) {
				calls++
				return int32(len(k.Name) % 7), base.Add(time.Duration(len(k.Name)) * time.Second)
			})
			for i := 0; i < n; i++ {
				q.Add(GroupKey("ns", fmt.Sprintf("unit-%d", i)))
			}
			ctx := context.Background()
			calls = 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				it, _ := q.Pop(ctx)
				k := it.Key
				q.Done(k)
				q.Add(k)
			}
			b.ReportMetric(float64(calls)/float64(b.N), "order-calls/pop")
		})
	}
}
