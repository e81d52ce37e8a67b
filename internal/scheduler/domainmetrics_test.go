package scheduler

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// zonedRacks is 2 zones × 2 racks of one node × 4 GPUs (even GPUs in
// clique c0, odd ones in c1), and a CPU node without topology labels.
const zonedRacks = `
nodePools:
- name: gpu
  count: 4
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels:
    topology.kubernetes.io/zone: "zone-{{div .Index 2}}"
    example.com/rack: "rack-{{.Index}}"
  devices:
  - driver: gpu.example.com
    count: 4
    attributes:
      clique: {string: "c{{mod .Index 2}}"}
- name: cpu
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
`

// allocated is a claim holding devices of node's pool.
func allocated(name, node string, devices ...string) *resourcev1.ResourceClaim {
	c := builders.Claim("other", name, "gpu.example.com", int64(len(devices)))
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: c.Spec.Devices.Requests[0].Name, Driver: "gpu.example.com", Pool: node, Device: d,
		})
	}
	return c
}

// scrapeRegistry renders the scheduler's registry as Prometheus does and
// returns the series whose name starts with prefix, "name{labels}" → value.
func scrapeRegistry(t *testing.T, s *Scheduler, prefix string) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// The scheduler exports, at scrape time, the devices of each domain of the
// keys its PodGroups use (required, preferred, device attribute) and of
// the zone — not of a key no node carries, and nothing per node.
func TestDomainMetrics(t *testing.T) {
	a := builders.GangPodGroup("ml", "a", 2)
	a.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}}}
	a.Annotations = map[string]string{lockv1.PreferredTopologyAnnotation: "example.com/rack, example.com/nowhere"}
	b := builders.GangPodGroup("ml", "b", 2)
	b.Annotations = map[string]string{lockv1.DeviceTopologyAnnotation: "gpu.example.com/clique"}
	f := newFixture(t, zonedRacks, []runtime.Object{a, b, allocated("x", "gpu-0", "gpu-0"), allocated("y", "gpu-3", "gpu-0", "gpu-1")}...)
	f.waitFor("claims in the cache", func() bool { return f.s.state.Cache.View().Allocated.Len() == 3 })
	series := func(name, key, domain string) string {
		return fmt.Sprintf(`%s{device_class="gpu.example.com",domain=%q,topology_key=%q}`, name, domain, key)
	}
	want := map[string]float64{
		`lockstep_topology_domains{topology_key="topology.kubernetes.io/zone"}`: 2,
		`lockstep_topology_domains{topology_key="example.com/rack"}`:            4,
		`lockstep_topology_domains{topology_key="gpu.example.com/clique"}`:      2,
	}
	for domain, free := range map[string]float64{"zone-0": 7, "zone-1": 6} {
		want[series("lockstep_domain_devices", "topology.kubernetes.io/zone", domain)] = 8
		want[series("lockstep_domain_free_devices", "topology.kubernetes.io/zone", domain)] = free
	}
	for domain, free := range map[string]float64{"rack-0": 3, "rack-1": 4, "rack-2": 4, "rack-3": 2} {
		want[series("lockstep_domain_devices", "example.com/rack", domain)] = 4
		want[series("lockstep_domain_free_devices", "example.com/rack", domain)] = free
	}
	// gpu-0 is c0 on both gpu-0 and gpu-3; gpu-1 of gpu-3 is c1.
	for domain, free := range map[string]float64{"c0": 6, "c1": 7} {
		want[series("lockstep_domain_devices", "gpu.example.com/clique", domain)] = 8
		want[series("lockstep_domain_free_devices", "gpu.example.com/clique", domain)] = free
	}
	got := scrapeRegistry(t, f.s, "lockstep_domain")
	for k, v := range scrapeRegistry(t, f.s, "lockstep_topology_domains") {
		got[k] = v
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series (-want,+got):\n%s", diff)
	}
}

// A key with more domains than maxDomainsPerKey (a level per node) exports
// its domain count only; without groups only the zone is counted.
func TestCountDomainsBounded(t *testing.T) {
	in := builders.SnapshotInput(t, fmt.Sprintf(`
nodePools:
- name: gpu
  count: %d
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {topology.kubernetes.io/zone: "zone-{{mod .Index 3}}"}
  devices: [{driver: gpu.example.com, count: 1}]
`, maxDomainsPerKey+1))
	snap := snapshot.New(in)
	_, ctx := ktesting.NewTestContext(t)
	got := map[string]int{}
	for _, d := range countDomains(ctx, snap, dra.NewCache(), []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}, nil) {
		got[d.key+" "+d.domain] = d.total
	}
	want := map[string]int{
		"kubernetes.io/hostname ":            maxDomainsPerKey + 1,
		"topology.kubernetes.io/zone ":       3,
		"topology.kubernetes.io/zone zone-0": 167, "topology.kubernetes.io/zone zone-1": 167, "topology.kubernetes.io/zone zone-2": 167,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series: key domain → devices or domains (-want,+got):\n%s", diff)
	}
}

// BenchmarkDomainMetrics is one scrape's topology series at 5,000 nodes ×
// 8 GPUs in 10 zones and 50 racks, 1,250 of the GPUs allocated: the cache's
// view and the counts for the zone and the rack.
func BenchmarkDomainMetrics(b *testing.B) {
	in := builders.SnapshotInput(b, `
nodePools:
- name: gpu
  count: 5000
  capacity: {cpu: "96", memory: 1Ti, pods: "110"}
  labels:
    topology.kubernetes.io/zone: "zone-{{div .Index 500}}"
    example.com/rack: "rack-{{div .Index 100}}"
  devices: [{driver: gpu.example.com, count: 8}]
`)
	for i := 0; i < 1250; i++ {
		in.Claims = append(in.Claims, allocated(fmt.Sprint("c", i), in.Nodes[i*4].Name, "gpu-0"))
	}
	cache := snapshot.CacheFrom(in)
	cel := dra.NewCache()
	_, ctx := ktesting.NewTestContext(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := countDomains(ctx, cache.View(), cel, []string{"example.com/rack", "topology.kubernetes.io/zone"}, nil); len(got) != 62 {
			b.Fatalf("%d series, want 62", len(got))
		}
	}
}
