package explain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// racked is 2 zones × 2 racks × 2 nodes × 4 GPUs (8 CPUs each); each GPU
// carries a clique attribute: even GPUs clique c0, odd ones c1.
const racked = `
nodePools:
- name: gpu
  count: 8
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels:
    topology.kubernetes.io/zone: "zone-{{div .Index 4}}"
    example.com/rack: "rack-{{div .Index 2}}"
  devices:
  - driver: gpu.example.com
    count: 4
    attributes:
      clique: {string: "c{{mod .Index 2}}"}
`

const (
	zone = "topology.kubernetes.io/zone"
	rack = "example.com/rack"
)

// busyGPUs holds GPUs of each node (node index → how many, from gpu-0),
// so racks 0..3 have 2, 5, 8 and 3 free GPUs.
var busyGPUs = map[int]int{0: 3, 1: 3, 2: 3, 3: 0, 4: 0, 5: 0, 6: 2, 7: 3}

// topologyCase decides a gang of n one-GPU ranks with constraints, the
// first running of them already bound to node gpu-4 (zone-1, rack-2), and
// returns explain's topology report on the cluster the scheduler sees.
// With priority, the gang's pods have it and it may preempt the busy pods
// (priority 0).
func topologyCase(t *testing.T, n int, required, preferred []string, device string, running int, priority ...int32) (*TopologyReport, decide.Decision) {
	t.Helper()
	in := builders.SnapshotInput(t, racked)
	for i, node := range in.Nodes {
		for d := 0; d < busyGPUs[i]; d++ {
			name := fmt.Sprintf("busy-%d-%d", i, d)
			c := builders.Claim("other", name, "gpu.example.com", 1)
			c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: c.Spec.Devices.Requests[0].Name, Driver: "gpu.example.com", Pool: node.Name, Device: fmt.Sprintf("gpu-%d", d),
			}}}}
			in.Claims = append(in.Claims, c)
			busy := builders.MakePod().Namespace("other").Name(name).Node(node.Name).Claim("gpu", name).Obj()
			busy.UID, busy.Spec.Priority = types.UID(name), ptr.To[int32](0)
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: busy.UID}}
			in.Pods = append(in.Pods, busy)
		}
	}
	pg := builders.GangPodGroup("ml", "train", int32(n))
	for _, k := range required {
		if pg.Spec.SchedulingConstraints == nil {
			pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
		}
		pg.Spec.SchedulingConstraints.Topology = append(pg.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
	}
	pg.Annotations = map[string]string{}
	if len(preferred) > 0 {
		pg.Annotations[lockv1.PreferredTopologyAnnotation] = strings.Join(preferred, ",")
	}
	if device != "" {
		pg.Annotations[lockv1.DeviceTopologyAnnotation] = device
	}
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("train-%d", i)
		// Each rank's own claim, as a ResourceClaimTemplate makes it.
		c := builders.Claim("ml", name, "gpu.example.com", 1)
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID(name), Controller: ptr.To(true)}}
		in.Claims = append(in.Claims, c)
		p := builders.MakePod().Namespace("ml").Name(name).Member("train").Req(corev1.ResourceCPU, "1").Claim("gpu", name).Obj()
		p.UID = types.UID(name)
		if len(priority) > 0 {
			p.Spec.Priority = ptr.To(priority[0])
		}
		if i < running {
			p.Spec.NodeName = "gpu-4"
			c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: c.Spec.Devices.Requests[0].Name, Driver: "gpu.example.com", Pool: "gpu-4", Device: fmt.Sprintf("gpu-%d", 3-i),
			}}}}
		}
		pods = append(pods, p)
		in.Pods = append(in.Pods, p)
	}
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))))
	st := &cycle.State{Cache: snapshot.CacheFrom(in), CEL: dra.NewCache(), Clock: clock.RealClock{}}
	input := decide.Input{Unit: podgroup.Single(podgroup.Resolve(pg, "ml", "train", pods, nil))}
	if len(priority) > 0 {
		input.Priority = priority[0]
		input.Preemption = func() (*decide.Preemption, error) {
			return &decide.Preemption{Candidates: preemption.Candidates(in.Pods, func(string, string) (*lockv1.PodGroup, int32) { return nil, 0 })}, nil
		}
	}
	d := decide.Decide(ctx, st.Snapshot(ctx, "ml/train", input.Priority), st.CEL, input)
	if d.Kind == decide.Error {
		t.Fatal(d.Err)
	}
	tr, err := topologyReport(ctx, st.Snapshot(ctx, "ml/train", 0), st.CEL, d, []string{"gpu.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	return tr, d
}

// row is a domain as the tests compare it: name, free GPUs, members fit,
// admitted.
type row struct {
	Name     string
	Free     int
	Fit      int
	Admitted bool
}

func rows(lv TopologyLevel) []row {
	var out []row
	for _, d := range lv.Domains {
		out = append(out, row{d.Name, d.Devices[0].Free, d.Fit, d.Admitted})
	}
	return out
}

type level struct {
	Kind, Key string
	Rows      []row
}

func levels(tr *TopologyReport) []level {
	var out []level
	for _, lv := range tr.Levels {
		out = append(out, level{lv.Kind, lv.Key, rows(lv)})
	}
	return out
}

func TestTopologyReport(t *testing.T) {
	z0, z1 := zone+"=zone-0", zone+"=zone-1"
	r := func(z string, i int) string { return fmt.Sprintf("%s, %s=rack-%d", z, rack, i) }
	for name, tc := range map[string]struct {
		n                   int
		required, preferred []string
		device              string
		running             int
		placedIn, best      string
		largest             string
		want                []level
		excluded            []placement.ReasonCount
	}{
		"a gang that fits its preferred rack is placed in the rack with room, the one explain lists first": {
			n: 6, required: []string{zone}, preferred: []string{rack},
			placedIn: r(z1, 2), largest: r(z1, 2),
			want: []level{
				{LevelPreferred, rack, []row{{r(z1, 2), 8, 6, true}, {r(z0, 1), 5, 5, false}, {r(z1, 3), 3, 3, false}, {r(z0, 0), 2, 2, false}}},
				{LevelRequired, zone, []row{{z0, 7, 6, true}, {z1, 11, 6, true}}},
			},
		},
		"a gang no rack holds falls back to the zone with room": {
			n: 10, required: []string{zone}, preferred: []string{rack},
			placedIn: z1, largest: z1,
			want: []level{
				{LevelPreferred, rack, []row{{r(z1, 2), 8, 8, false}, {r(z0, 1), 5, 5, false}, {r(z1, 3), 3, 3, false}, {r(z0, 0), 2, 2, false}}},
				{LevelRequired, zone, []row{{z1, 11, 10, true}, {z0, 7, 7, false}}},
			},
		},
		"a gang no domain holds: the largest domain is the zone with the most room": {
			n: 12, required: []string{zone},
			best: z1, largest: z1,
			want: []level{{LevelRequired, zone, []row{{z1, 11, 11, false}, {z0, 7, 7, false}}}},
		},
		"preferred only: every node is the last domain": {
			n: 9, preferred: []string{rack},
			placedIn: "all nodes", largest: "all nodes",
			want: []level{
				{LevelPreferred, rack, []row{{rack + "=rack-2", 8, 8, false}, {rack + "=rack-1", 5, 5, false}, {rack + "=rack-3", 3, 3, false}, {rack + "=rack-0", 2, 2, false}}},
				{LevelAny, "all nodes", []row{{"all nodes", 18, 9, true}}},
			},
		},
		"a device attribute: each clique's free devices are its own": {
			// Busy GPUs from gpu-0: nodes 0,1,2,7 hold c0 gpu-0, gpu-2 and
			// c1 gpu-1; node 6 holds gpu-0 (c0) and gpu-1 (c1).
			n: 6, device: "gpu.example.com/clique",
			// c0 has 7 free, c1 11: both hold the gang, c0 is tried first.
			placedIn: "gpu.example.com/clique=c0", largest: "gpu.example.com/clique=c0",
			want: []level{{LevelRequired, "gpu.example.com/clique", []row{
				{"gpu.example.com/clique=c0", 7, 6, true}, {"gpu.example.com/clique=c1", 11, 6, true},
			}}},
		},
		"a gang with running members lists only the domains they run in": {
			// 2 of 6 run in rack-2; zone-0's racks are never tried.
			n: 6, running: 2, required: []string{zone}, preferred: []string{rack},
			placedIn: r(z1, 2), largest: r(z1, 2),
			want: []level{
				{LevelPreferred, rack, []row{{r(z1, 2), 6, 6, true}}},
				{LevelRequired, zone, []row{{z1, 9, 6, true}}},
			},
			excluded: []placement.ReasonCount{{Reason: "node(s) outside " + z1 + ", where the gang's running members are", Nodes: 4}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			tr, d := topologyCase(t, tc.n, tc.required, tc.preferred, tc.device, tc.running)
			if tr == nil {
				t.Fatal("no topology report")
			}
			if diff := cmp.Diff(tc.want, levels(tr)); diff != "" {
				t.Errorf("levels (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{tc.placedIn, tc.best, tc.largest}, []string{tr.PlacedIn, tr.BestAttempt, tr.Largest.Name}); diff != "" {
				t.Errorf("placed in, best attempt, largest (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.excluded, tr.Excluded); diff != "" {
				t.Errorf("nodes in no domain (-want,+got):\n%s", diff)
			}
			// Explain names the scheduler's domain: the decision's.
			if d.Outcome.Admitted && tr.PlacedIn != d.Result.Domain {
				t.Errorf("explain says %q, the decision placed the gang in %q", tr.PlacedIn, d.Result.Domain)
			}
		})
	}
}

// The domain the scheduler places a gang in is the first, in the order it
// tries them, where explain's per-domain simulation admits it.
func TestTopologyReportAgreesWithTheScheduler(t *testing.T) {
	for _, n := range []int{1, 4, 6, 8, 9, 11} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			tr, d := topologyCase(t, n, []string{zone}, []string{rack}, "", 0)
			if !d.Outcome.Admitted {
				t.Fatalf("%d ranks not placed: %s", n, d.Summary)
			}
			first := ""
			for _, lv := range tr.Levels {
				for _, dr := range lv.Domains {
					if dr.Admitted && first == "" {
						first = dr.Name
					}
				}
			}
			if first != d.Result.Domain || tr.PlacedIn != d.Result.Domain {
				t.Errorf("scheduler placed in %q; explain's first admitting domain %q, placedIn %q", d.Result.Domain, first, tr.PlacedIn)
			}
		})
	}
}

// A unit without topology has no domains to list.
func TestTopologyReportWithoutTopology(t *testing.T) {
	tr, d := topologyCase(t, 4, nil, nil, "", 0)
	if d.Kind != decide.Bind || tr != nil {
		t.Errorf("decision %s, report %+v: want the gang bound and no topology report", d.Kind, tr)
	}
}

// A gang no zone holds, which may preempt: explain names the zone where
// the preemption makes room — the cheapest (zone-1: 3 busy GPUs to evict,
// zone-0: 7) — beside its best attempt.
func TestTopologyReportPreemption(t *testing.T) {
	tr, d := topologyCase(t, 14, []string{zone}, nil, "", 0, 100)
	if d.Kind != decide.Preempt || d.Plan == nil {
		t.Fatalf("decision %s (%s): want a preemption plan", d.Kind, d.Reason)
	}
	z1 := zone + "=zone-1"
	if diff := cmp.Diff([]string{z1, z1, ""}, []string{tr.PreemptIn, tr.BestAttempt, tr.PlacedIn}); diff != "" {
		t.Errorf("preempt in, best attempt, placed in (-want,+got):\n%s", diff)
	}
	if got := d.Plan.VictimPods(); got != 3 {
		t.Errorf("%d victims, want the 3 busy pods of zone-1 that free the GPUs missing there", got)
	}
}
