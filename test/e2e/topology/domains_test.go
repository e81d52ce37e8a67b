package topology

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// rackGang is a gang of n one-GPU ranks required in one rack.
func rackGang(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, n int) {
	t.Helper()
	pg := builders.GangPodGroup(ns, name, int32(n))
	pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: rack}}}
	h.CreatePodGroup(ctx, t, pg)
	for i := 0; i < n; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", name, i)).Member(name).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// sixInOneRack is a namespace with the one-GPU claim template and a rack
// gang of 6 bound (6 of one rack's 8 GPUs).
func sixInOneRack(t *testing.T) (*harness.Harness, string, context.Context) {
	t.Helper()
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	rackGang(t, ctx, h, ns, "six", 6)
	waitBound(t, ctx, h, ns, "six", 6)
	return h, ns, ctx
}

// racksOf are the racks (and zones) the group's bound pods run in.
func racksOf(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string) (racks, zones map[string]int) {
	t.Helper()
	pods, _, err := h.GroupPods(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	racks, zones = map[string]int{}, map[string]int{}
	for _, p := range pods {
		n, err := h.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		racks[n.Labels[rack]]++
		zones[n.Labels[zone]]++
	}
	return racks, zones
}

// TestDomainsInExplainAndMetrics: a rack gang of 6 takes 6 of one rack's 8
// GPUs; a rack gang of 9 fits no rack. Explain lists the racks with their
// free GPUs and how many of the 9 fit in each (the most: 8, in a full
// rack), and the node without the rack label; the scheduler's metric
// counts the free GPUs per rack and per zone.
func TestDomainsInExplainAndMetrics(t *testing.T) {
	h, ns, ctx := sixInOneRack(t)
	racks, zones := racksOf(t, ctx, h, ns, "six")
	if len(racks) != 1 {
		t.Fatalf("the rack gang runs in racks %v, want one", racks)
	}
	var fullRack, fullZone string
	for r := range racks {
		fullRack = r
	}
	for z := range zones {
		fullZone = z
	}
	rackGang(t, ctx, h, ns, "nine", 9)
	waitCondition(t, ctx, h, ns, "nine", "Unschedulable")

	r := h.Explain(t, ns, "podgroup", "nine")
	td := r.TopologyDomains
	if td == nil {
		t.Fatalf("explain lists no topology domains: %+v", r)
	}
	type row struct {
		Name      string
		Free, Fit int
		Admitted  bool
	}
	var got []row
	want := []row{}
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("%s=rack-%d", rack, i)
		if fmt.Sprintf("rack-%d", i) != fullRack {
			want = append(want, row{name, 8, 8, false})
		}
	}
	want = append(want, row{rack + "=" + fullRack, 2, 2, false})
	if len(td.Levels) != 1 || td.Levels[0].Kind != explain.LevelRequired || td.Levels[0].Key != rack {
		t.Fatalf("levels: want one, the required %s; got %+v", rack, td.Levels)
	}
	for _, d := range td.Levels[0].Domains {
		if len(d.Devices) != 1 || d.Devices[0].Class != "gpu.example.com" || d.Devices[0].Total != 8 {
			t.Errorf("domain %s: want 8 GPUs of gpu.example.com, got %+v", d.Name, d.Devices)
		}
		got = append(got, row{d.Name, d.Devices[0].Free, d.Fit, d.Admitted})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("racks (-want,+got):\n%s", diff)
	}
	if td.PlacedIn != "" || td.Largest == nil || td.Largest.Fit != 8 || td.BestAttempt != td.Largest.Name {
		t.Errorf("want not placed, the largest domain (and best attempt) a full rack holding 8; got placedIn %q, best attempt %q, largest %+v", td.PlacedIn, td.BestAttempt, td.Largest)
	}
	if diff := cmp.Diff([]placement.ReasonCount{{Reason: "node(s) lack the topology labels [" + rack + "]", Nodes: 1}}, td.Excluded); diff != "" {
		t.Errorf("nodes in no domain (-want,+got):\n%s", diff)
	}
	out, err := exec.Command(filepath.Join(h.BinDir, "lockstep"), "explain", "podgroup", "nine", "-n", ns, "--kubeconfig", h.Kubeconfig).Output()
	if err != nil {
		t.Fatalf("lockstep explain: %v", err)
	}
	for _, line := range []string{"7. Topology: required [" + rack + "]", "   required " + rack + ": 4 domain(s)", "   in no domain: 1 node(s) lack the topology labels [" + rack + "]"} {
		if !strings.Contains(string(out), line+"\n") {
			t.Errorf("explain's output lacks %q:\n%s", line, out)
		}
	}
	t.Logf("lockstep explain podgroup nine:\n%s", out)

	wantMetrics := map[string]float64{
		`lockstep_topology_domains{topology_key="` + rack + `"}`: 4,
		`lockstep_topology_domains{topology_key="` + zone + `"}`: 2,
	}
	for i := 0; i < 4; i++ {
		free := 8.0
		if fmt.Sprintf("rack-%d", i) == fullRack {
			free = 2
		}
		wantMetrics[fmt.Sprintf(`lockstep_domain_free_devices{device_class="gpu.example.com",domain="rack-%d",topology_key=%q}`, i, rack)] = free
		wantMetrics[fmt.Sprintf(`lockstep_domain_devices{device_class="gpu.example.com",domain="rack-%d",topology_key=%q}`, i, rack)] = 8
	}
	for i := 0; i < 2; i++ {
		free := 16.0
		if fmt.Sprintf("zone-%d", i) == fullZone {
			free = 10
		}
		wantMetrics[fmt.Sprintf(`lockstep_domain_free_devices{device_class="gpu.example.com",domain="zone-%d",topology_key=%q}`, i, zone)] = free
		wantMetrics[fmt.Sprintf(`lockstep_domain_devices{device_class="gpu.example.com",domain="zone-%d",topology_key=%q}`, i, zone)] = 16
	}
	var last map[string]float64
	harness.Eventually(t, ctx, "the per-domain device metrics", func(ctx context.Context) (bool, string, error) {
		last = scrape(t, ctx, h, "lockstep_domain", "lockstep_topology_domains")
		diff := cmp.Diff(wantMetrics, last)
		return diff == "", diff, nil
	})
}

// scrape reads the scheduler's /metrics series whose names start with one
// of prefixes, "name{labels}" → value.
func scrape(t *testing.T, ctx context.Context, h *harness.Harness, prefixes ...string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.Cluster.SchedulerMetricsURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping the scheduler: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				i := strings.LastIndexByte(line, ' ')
				if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
					out[line[:i]] = v
				}
			}
		}
	}
	return out
}

func waitBound(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, want int) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("group %s with %d bound pods", group, want), func(ctx context.Context) (bool, string, error) {
		_, bound, err := h.GroupPods(ctx, ns, group)
		return bound == want, fmt.Sprintf("%d bound", bound), err
	})
}

// waitCondition waits for the group's PodGroupInitiallyScheduled=False
// condition with reason.
func waitCondition(t *testing.T, ctx context.Context, h *harness.Harness, ns, group, reason string) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("group %s condition False/%s", group, reason), func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, group)
		if err != nil || c == nil {
			return false, "no condition", err
		}
		return c.Status == metav1.ConditionFalse && c.Reason == reason, fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message), nil
	})
}
