package scheduler

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// pendingCollector computes lockstep_pending_entities and lockstep_queue_depth
// at scrape time from the caches, so nothing is counted twice or missed.
type pendingCollector struct{ s *Scheduler }

var _ prometheus.Collector = pendingCollector{}

func (c pendingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- metrics.PendingDesc
	ch <- metrics.QueueDepthDesc
}

func (c pendingCollector) Collect(ch chan<- prometheus.Metric) {
	active, parked := c.s.queue.Len()
	ch <- prometheus.MustNewConstMetric(metrics.QueueDepthDesc, prometheus.GaugeValue, float64(active), "active")
	ch <- prometheus.MustNewConstMetric(metrics.QueueDepthDesc, prometheus.GaugeValue, float64(parked), "parked")
	pods, err := c.s.listers.pods.List(labels.Everything())
	if err != nil {
		return
	}
	type key struct {
		kind     string
		priority int32
	}
	counts := map[key]int{}
	seen := map[queue.Key]bool{}
	for _, p := range pods {
		if !podgroup.Ours(p) || !podgroup.Pending(p) || c.s.assumed(p) {
			continue
		}
		k := unitKey(p)
		if seen[k] {
			continue
		}
		seen[k] = true
		prio, _ := c.s.order(k)
		kind := "pod"
		if podgroup.GroupOf(p) != "" {
			kind = "podgroup"
		}
		counts[key{kind, prio}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(metrics.PendingDesc, prometheus.GaugeValue, float64(n), k.kind, strconv.Itoa(int(k.priority)))
	}
}
