package autoscaling

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// benchRanks is the gang of the benchmark: 16 ranks of 8 GPUs, one
// gpu-8x node each, required in one zone; zone-a has 12 gpu-8x left.
const (
	benchRanks     = 16
	benchZoneALeft = "12"
	benchWindow    = 2 * time.Minute
)

// provisionRun is what one run of a 16-node gang left.
type provisionRun struct {
	// whole: every rank bound, all in one zone, within the window.
	whole bool
	// bound is how many ranks were bound when the run ended.
	bound int
	// idleNodeSeconds are the seconds gang nodes were up (Ready) while the
	// gang did not run whole: launched, billed, training nothing.
	idleNodeSeconds float64
	// leftBehind are the nodes up at the end of a run whose gang never ran
	// whole (a partial set nobody will use).
	leftBehind int
	// lastReadyToBound is from the last of its nodes Ready to the gang
	// bound (whole runs only).
	lastReadyToBound time.Duration
	// launched counts the nodes that came up during the run.
	launched int
}

// BenchmarkGangProvisioning: a 16-rank gang of 8 GPUs a rank, required in
// one zone, on a cluster with no GPU node, zone-a having 12 gpu-8x left
// (launches fail partway), LOCKSTEP_BENCH_RUNS times (default 3) for each
// of:
//   - lockstep: Lockstep asks Karpenter for the gang's nodes as one
//     request (its pods claim 8 GPUs each through DRA);
//   - kube-scheduler: Karpenter alone with kube-scheduler v1.37 pod by
//     pod beside it (its pods request 8 nvidia.com/gpu each, the device
//     plugin's path, since Karpenter ignores DRA requests by default; one
//     zone is required by pod affinity on the zone among the ranks);
//   - in-tree-gang: the same pods as members of a scheduling.k8s.io/v1beta1
//     PodGroup of gang minCount 16 (spec.schedulingGroup), which
//     kube-scheduler v1.37 places all or nothing with the upstream
//     profile's gates (GenericWorkload): the gang upstream offers, with
//     Karpenter still provisioning for its pods one by one.
//
// The in-tree gang runs only on the upstream profile (profileEnv, as make
// bench sets it). LOCKSTEP_BENCH_MODES (comma-separated) runs some modes.
//
// Per run: whether the gang ran whole, the node-seconds of gang nodes up
// while it did not, the nodes of a partial set left behind, and the time
// from its last node Ready to the gang bound.
func BenchmarkGangProvisioning(b *testing.B) {
	h := helper{harness.Get(b)}
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("LOCKSTEP_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	ctx := harness.Context(b, time.Duration(runs)*2*(benchWindow+3*time.Minute))
	h.provisioning(ctx, b)
	h.StartKubeScheduler(b, "kube-scheduler-bench")
	modes := []string{"lockstep", "kube-scheduler"}
	if h.Profile == devcluster.ProfileUpstream {
		modes = append(modes, "in-tree-gang")
	} else {
		b.Logf("the in-tree gang needs the upstream profile (%s=upstream): left out", profileEnv)
	}
	if v := os.Getenv("LOCKSTEP_BENCH_MODES"); v != "" {
		modes = strings.Split(v, ",")
	}
	results := map[string][]provisionRun{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < runs; r++ {
			for _, mode := range modes {
				h.waitNoNodeClaims(ctx, b)
				h.setCapacity(ctx, b, map[string]string{"gpu-8x.zone-a": benchZoneALeft})
				ns := h.Namespace(b)
				run := h.provisionRun(ctx, b, ns, mode)
				results[mode] = append(results[mode], run)
				b.Logf("%s run %d: whole %v, %d of %d bound, %d nodes up, idle %.0f node·s, %d left behind, last Ready → bound %v",
					mode, r+1, run.whole, run.bound, benchRanks, run.launched, run.idleNodeSeconds, run.leftBehind, run.lastReadyToBound.Round(10*time.Millisecond))
				// Clean up at once (not measured): the run's pods, then its
				// nodes (consolidation would take them one budget at a time).
				if err := h.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
					b.Fatal(err)
				}
				if err := h.Dynamic.Resource(nodeClaims).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Logf("%d runs each, 16-rank gang (8 GPUs a rank, one zone), zone-a with %s gpu-8x left:", runs, benchZoneALeft)
	b.Logf("%-15s %-10s %-22s %-20s %-26s", "scheduler", "whole", "idle node·min (mean)", "left behind (mean)", "last Ready → bound (p50)")
	for _, mode := range modes {
		rs := results[mode]
		whole, idle, left := 0, 0.0, 0
		var lat []time.Duration
		for _, r := range rs {
			if r.whole {
				whole++
				lat = append(lat, r.lastReadyToBound)
			}
			idle += r.idleNodeSeconds
			left += r.leftBehind
		}
		p50 := "—"
		if len(lat) > 0 {
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p50 = lat[len(lat)/2].Round(10 * time.Millisecond).String()
		}
		b.Logf("%-15s %-10s %-22s %-20s %-26s", mode, fmt.Sprintf("%d/%d", whole, len(rs)),
			fmt.Sprintf("%.1f", idle/60/float64(len(rs))), fmt.Sprintf("%.1f", float64(left)/float64(len(rs))), p50)
		b.ReportMetric(float64(whole)/float64(len(rs)), "whole-"+mode)
		b.ReportMetric(idle/60/float64(len(rs)), "idle-node-min-"+mode)
	}
}

// provisionRun creates the gang for one scheduler and samples the nodes
// and ranks every 250 ms until it runs whole or the window ends.
func (h helper) provisionRun(ctx context.Context, b *testing.B, ns, mode string) provisionRun {
	b.Helper()
	switch mode {
	case "lockstep":
		h.gang(ctx, b, ns, "train", benchRanks)
	case "in-tree-gang":
		pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"}, Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: benchRanks}},
		}}
		if _, err := h.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		fallthrough
	default:
		for i := range benchRanks {
			p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("train-%d", i)).Obj()
			p.Labels = map[string]string{"gang": "train"}
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{devcluster.KarpenterGPUResource: resource.MustParse("8")}
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{devcluster.KarpenterGPUResource: resource.MustParse("8")}
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gang": "train"}}, TopologyKey: corev1.LabelTopologyZone,
			}}}}
			if mode == "in-tree-gang" {
				p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
			}
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	var run provisionRun
	seen := map[string]bool{}
	var lastReady time.Time
	start := time.Now()
	const tick = 250 * time.Millisecond
	for time.Since(start) < benchWindow {
		nodes, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool"})
		if err != nil {
			b.Fatal(err)
		}
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		bound, zones := 0, map[string]bool{}
		zoneOf := map[string]string{}
		ready := 0
		for _, n := range nodes.Items {
			zoneOf[n.Name] = n.Labels[corev1.LabelTopologyZone]
			if nodeReady(&n) {
				ready++
				if !seen[n.Name] {
					seen[n.Name] = true
					lastReady = time.Now()
				}
			}
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
				zones[zoneOf[p.Spec.NodeName]] = true
			}
		}
		run.bound = bound
		if bound == benchRanks && len(zones) == 1 {
			run.whole = true
			run.lastReadyToBound = time.Since(lastReady)
			break
		}
		run.idleNodeSeconds += float64(ready) * tick.Seconds()
		run.leftBehind = ready
		time.Sleep(tick)
	}
	run.launched = len(seen)
	if run.whole {
		run.leftBehind = 0
	}
	return run
}
