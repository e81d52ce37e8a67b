package snapshot

import (
	"fmt"
	"testing"
)

// A view, taken at any point between the loop's cycles, equals the
// snapshot built from scratch from the same objects with the assumptions
// applied; and taking it changes nothing the loop's next Update returns.
func TestCacheViewEqualsRebuild(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			w := newWorld(seed)
			for step := 0; step < 300; step++ {
				w.event()
				switch w.rng.Intn(4) {
				case 0:
					snap := w.cache.Update()
					w.compare(t, step, snap)
					w.cycle(snap)
				case 1:
					w.compare(t, step, w.cache.View())
				}
			}
			w.compare(t, -1, w.cache.View())
			w.compare(t, -1, w.cache.Update())
		})
	}
}

// A view is its own: the loop's cycle changing its snapshot does not
// change a view taken before.
func TestCacheViewIsApart(t *testing.T) {
	w := newWorld(7)
	for step := 0; step < 100; step++ {
		w.event()
	}
	view := w.cache.View()
	w.compare(t, 0, view)
	w.cycle(w.cache.Update())
	w.compare(t, 1, view)
}

// BenchmarkCacheView is what a scrape of the scheduler's metrics costs the
// cache (its lock held throughout): a view of 5,000 nodes × 8 GPUs with
// 17,500 allocated claims.
func BenchmarkCacheView(b *testing.B) {
	c := CacheFrom(benchInput())
	c.Update()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.View()
	}
}
