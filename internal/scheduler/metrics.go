package scheduler

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// pendingCollector computes lockstep_pending_entities,
// lockstep_pending_oldest_seconds and lockstep_queue_depth at scrape time
// from the caches, so nothing is counted twice or missed.
type pendingCollector struct{ s *Scheduler }

var _ prometheus.Collector = pendingCollector{}

func (c pendingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- metrics.PendingDesc
	ch <- metrics.OldestPendingDesc
	ch <- metrics.QueueDepthDesc
	ch <- metrics.PodStatusPendingDesc
	ch <- metrics.PodStatusPaceDesc
}

func (c pendingCollector) Collect(ch chan<- prometheus.Metric) {
	active, parked := c.s.queue.Len()
	ch <- prometheus.MustNewConstMetric(metrics.QueueDepthDesc, prometheus.GaugeValue, float64(active), "active")
	ch <- prometheus.MustNewConstMetric(metrics.QueueDepthDesc, prometheus.GaugeValue, float64(parked), "parked")
	ch <- prometheus.MustNewConstMetric(metrics.PodStatusPendingDesc, prometheus.GaugeValue, float64(c.s.podStatus.pending()))
	ch <- prometheus.MustNewConstMetric(metrics.PodStatusPaceDesc, prometheus.GaugeValue, c.s.podStatus.pace.rate())
	pods, err := c.s.listers.pods.List(labels.Everything())
	if err != nil {
		return
	}
	type key struct {
		kind     string
		priority int32
	}
	counts := map[key]int{}
	oldest := map[key]time.Time{}
	seen := map[queue.Key]bool{}
	unitKey := c.s.unitKeys()
	assumed := c.s.state.Cache.AssumedNodes()
	for _, p := range pods {
		if !podgroup.Ours(p) || !podgroup.Pending(p) {
			continue
		}
		if _, ok := assumed[p.UID]; ok {
			continue
		}
		k := unitKey(p)
		if seen[k] {
			continue
		}
		seen[k] = true
		prio, since := c.s.order(k)
		kind := "pod"
		if podgroup.GroupOf(p) != "" {
			kind = "podgroup"
			if pg, err := c.s.podGroup(k.Namespace, k.Name); err == nil {
				since = podgroup.WaitingSince(pg).Time
			}
		}
		kk := key{kind, prio}
		counts[kk]++
		if o, ok := oldest[kk]; !ok || since.Before(o) {
			oldest[kk] = since
		}
	}
	now := c.s.clock.Now()
	for k, n := range counts {
		prio := strconv.Itoa(int(k.priority))
		ch <- prometheus.MustNewConstMetric(metrics.PendingDesc, prometheus.GaugeValue, float64(n), k.kind, prio)
		ch <- prometheus.MustNewConstMetric(metrics.OldestPendingDesc, prometheus.GaugeValue, max(now.Sub(oldest[k]).Seconds(), 0), k.kind, prio)
	}
}
