package scheduler

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamiclister"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/prometheus/client_golang/prometheus"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// maxDomainsPerKey bounds the per-domain series of one key: a key with
// more domains (kubernetes.io/hostname used as a level: one domain per
// node) exports only its domain count, so the series follow domains, not
// nodes.
const maxDomainsPerKey = 500

// domainCollector computes lockstep_domain_devices,
// lockstep_domain_free_devices and lockstep_topology_domains at scrape
// time from the scheduler's cache (snapshot.Cache.View: its own snapshot,
// never the scheduling loop's), for the topology keys PodGroups use
// (required and preferred node labels, device attributes) and the zone.
type domainCollector struct{ s *Scheduler }

var _ prometheus.Collector = domainCollector{}

func (c domainCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- metrics.DomainDevicesDesc
	ch <- metrics.DomainFreeDevicesDesc
	ch <- metrics.TopologyDomainsDesc
}

func (c domainCollector) Collect(ch chan<- prometheus.Metric) {
	labelKeys, attrs := c.s.topologyKeys()
	for _, d := range countDomains(context.Background(), c.s.state.Cache.View(), c.s.state.CEL, labelKeys, attrs) {
		if d.class == "" {
			ch <- prometheus.MustNewConstMetric(metrics.TopologyDomainsDesc, prometheus.GaugeValue, float64(d.total), d.key)
			continue
		}
		ch <- prometheus.MustNewConstMetric(metrics.DomainDevicesDesc, prometheus.GaugeValue, float64(d.total), d.key, d.domain, d.class)
		ch <- prometheus.MustNewConstMetric(metrics.DomainFreeDevicesDesc, prometheus.GaugeValue, float64(d.free), d.key, d.domain, d.class)
	}
}

// topologyKeys are the node label keys (the zone, and every required or
// preferred key of a PodGroup) and device attributes PodGroups use, from
// the scheduler's informers, sorted.
func (s *Scheduler) topologyKeys() (labelKeys, attrs []string) {
	keys := map[string]bool{corev1.LabelTopologyZone: true}
	attrSet := map[string]bool{}
	for _, pg := range s.podGroups() {
		for _, k := range podgroup.TopologyKeys(pg) {
			keys[k] = true
		}
		for _, k := range podgroup.PreferredTopology(pg) {
			keys[k] = true
		}
		if a := podgroup.DeviceTopology(pg); a != "" {
			attrSet[a] = true
		}
	}
	return sortedKeys(keys), sortedKeys(attrSet)
}

// podGroups are the PodGroups the scheduler's informers hold: Lockstep's
// and, where served, the in-tree ones (a group that does not convert is
// left out).
func (s *Scheduler) podGroups() []*lockv1.PodGroup {
	var out []*lockv1.PodGroup
	for _, l := range []dynamiclister.Lister{s.listers.podGroups, s.listers.upstreamPodGroups} {
		if l == nil {
			continue
		}
		list, err := l.List(labels.Everything())
		if err != nil {
			continue
		}
		for _, u := range list {
			if pg, err := podgroup.FromUnstructured(u); err == nil {
				out = append(out, pg)
			}
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// domainCount is one series: a DeviceClass's devices in one domain of a
// key; with no class, the number of domains of the key (total).
type domainCount struct {
	key, domain, class string
	total, free        int
}

// countDomains counts the devices of every DeviceClass in each domain of
// each label key and device attribute, a class only where the domain has
// devices of it; keys no node (or device) carries are left out. Each
// node's devices are counted once per class (dra.CountClassOn, as
// placement's messages count them), then summed per domain.
func countDomains(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, labelKeys, attrs []string) []domainCount {
	classes := sortedKeys(classNames(snap))
	perNode := make(map[*snapshot.NodeInfo][]dra.ClassCount, len(snap.Nodes))
	for _, ni := range snap.Nodes {
		for _, class := range classes {
			perNode[ni] = append(perNode[ni], dra.CountClassOn(ctx, snap, cache, class, []*snapshot.NodeInfo{ni}))
		}
	}
	var out []domainCount
	for _, key := range labelKeys {
		domains, _ := topology.Domains(snap, key)
		var series []domainCount
		for i := 0; i < len(domains) && len(domains) <= maxDomainsPerKey; i++ {
			for ci, class := range classes {
				sum := dra.ClassCount{Class: class}
				for _, ni := range domains[i].Nodes {
					c := perNode[ni][ci]
					sum.Total, sum.Allocated, sum.Tainted = sum.Total+c.Total, sum.Allocated+c.Allocated, sum.Tainted+c.Tainted
				}
				series = appendSeries(series, key, domains[i].Labels[0].Value, sum)
			}
		}
		out = appendKey(out, key, len(domains), series)
	}
	for _, attr := range attrs {
		out = append(out, attributeDomains(ctx, snap, cache, classes, attr)...)
	}
	return out
}

// attributeDomains counts, for a device attribute, the devices of each
// class carrying each of its values (only those: a device without the
// attribute is in no domain of it).
func attributeDomains(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, classes []string, attr string) []domainCount {
	nodesOf := map[string][]*snapshot.NodeInfo{}
	for _, ni := range snap.Nodes {
		for _, v := range topology.DeviceValues(ni, attr) {
			nodesOf[v] = append(nodesOf[v], ni)
		}
	}
	values := make([]string, 0, len(nodesOf))
	for v := range nodesOf {
		values = append(values, v)
	}
	sort.Strings(values)
	var series []domainCount
	for i := 0; i < len(values) && len(values) <= maxDomainsPerKey; i++ {
		v := values[i]
		only := func(driver string, d *resourcev1.Device) bool {
			got, ok := topology.AttributeValue(driver, d, attr)
			return ok && got == v
		}
		for _, class := range classes {
			series = appendSeries(series, attr, v, dra.CountClassWhere(ctx, snap, cache, class, nodesOf[v], only))
		}
	}
	return appendKey(nil, attr, len(values), series)
}

// appendSeries adds a domain's count of a class, if it has devices of it.
func appendSeries(out []domainCount, key, domain string, c dra.ClassCount) []domainCount {
	if c.Total == 0 {
		return out
	}
	return append(out, domainCount{key: key, domain: domain, class: c.Class, total: c.Total, free: c.Free()})
}

// appendKey adds a key's domain count and its series; nothing for a key
// no node carries.
func appendKey(out []domainCount, key string, domains int, series []domainCount) []domainCount {
	if domains == 0 {
		return out
	}
	return append(append(out, domainCount{key: key, total: domains}), series...)
}

func classNames(snap *snapshot.Snapshot) map[string]bool {
	out := make(map[string]bool, len(snap.Classes))
	for name := range snap.Classes {
		out[name] = true
	}
	return out
}
