package decide

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden decisions in testdata/*.golden")

// scenario is a cluster, what already runs on it, and units to decide in
// order; each unit that binds is assumed before the next is decided, as
// the scheduler does.
type scenario struct {
	Cluster string `json:"cluster"`
	Running []pods `json:"running"`
	Units   []pods `json:"units"`
	// Now is when the units are decided, as a Go duration after every
	// pod's creation ("": no clock, as before preemption counted the work
	// victims lose).
	Now string `json:"now"`
	// ShortWait is the preemption search's short wait (a Go duration; "":
	// none).
	ShortWait string `json:"shortWait"`
}

// pods are count pods of one shape: a gang of minCount (0: a basic group,
// or lone pods when group is empty), each asking cpu and gpus (one claim).
type pods struct {
	Name     string `json:"name"`
	Count    int    `json:"count"`
	MinCount int32  `json:"minCount"`
	Group    bool   `json:"group"`
	CPU      string `json:"cpu"`
	GPUs     int64  `json:"gpus"`
	Priority int32  `json:"priority"`
	// Gated members have a scheduling gate.
	Gated int `json:"gated"`
	// Bound, for a unit: its first Bound members are already bound (on
	// Nodes, cycling) with their devices allocated, as after an earlier
	// cycle; the others are pending.
	Bound int `json:"bound"`
	// Nodes: for running pods (and a unit's bound members), the node of
	// each pod in turn (cycling).
	Nodes []string `json:"nodes"`
	// Topology (required node label keys), Preferred (narrowest first) and
	// Device (a device attribute) are the group's topology.
	Topology  []string `json:"topology"`
	Preferred []string `json:"preferred"`
	Device    string   `json:"device"`
	// CapacityTypes is the group's capacity-types annotation ("": the
	// default).
	CapacityTypes string `json:"capacityTypes"`
	// Started and Checkpointed, for running pods, are when they started
	// and their group last reported a checkpoint, as Go durations after
	// their creation ("": at creation; never).
	Started      string `json:"started"`
	Checkpointed string `json:"checkpointed"`
	// MaxRuntime is the group's declared maximum runtime ("": none).
	MaxRuntime string `json:"maxRuntime"`
	// Tree, for a unit, makes it a scheduling tree (tree_test.go): Name
	// is its root's.
	Tree *treeSpec `json:"tree"`
}

// Decisions of each scenario in testdata/*.yaml against the golden
// testdata/*.golden (go test ./internal/decide -rewrite regenerates them).
func TestDecideScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			got := run(t, f)
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *rewrite {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create it)", err)
			}
			if got != string(want) {
				t.Errorf("decisions differ from %s (run with -rewrite after checking them):\n--- got ---\n%s\n--- want ---\n%s", golden, got, want)
			}
		})
	}
}

func run(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var sc scenario
	if err := yaml.UnmarshalStrict(b, &sc); err != nil {
		t.Fatal(err)
	}
	spec, err := clusterspec.Parse([]byte(sc.Cluster))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := clusterspec.Render(spec)
	if err != nil {
		t.Fatal(err)
	}
	in := snapshot.Input{Features: features.Default(), Nodes: objs.Nodes, Slices: objs.ResourceSlices, Classes: objs.DeviceClasses}
	groups := map[string]*lockv1.PodGroup{}
	priorities := map[string]int32{}
	free := freeDevices(objs.ResourceSlices)
	for _, r := range sc.Running {
		ps, claims, pg := build(r)
		for i, p := range ps {
			if c := bindOn(p, claims[i], r.Nodes[i%len(r.Nodes)], free); c != nil {
				in.Claims = append(in.Claims, c)
			}
			in.Pods = append(in.Pods, p)
		}
		if pg != nil {
			groups[pg.Name], priorities[pg.Name] = pg, r.Priority
		}
	}
	for _, ud := range sc.Units {
		if ud.Bound > 0 && len(ud.Nodes) == 0 {
			t.Fatalf("unit %s: bound members need nodes", ud.Name)
		}
	}
	r := &runner{t: t, cache: snapshot.CacheFrom(in), groups: groups, priorities: priorities, free: free}
	if sc.Now != "" {
		r.now = created.Add(mustDuration(sc.Now))
	}
	if sc.ShortWait != "" {
		r.shortWait = mustDuration(sc.ShortWait)
	}
	// The scheduler's cycle state (nominations, if any, included).
	r.st = &cycle.State{Cache: r.cache, CEL: dra.NewCache(), Clock: clock.RealClock{}}
	r.ctx = klog.NewContext(context.Background(), klog.Background().V(0))
	for _, ud := range sc.Units {
		if ud.Tree != nil {
			r.tree(ud)
			continue
		}
		r.unit(ud)
	}
	return r.out.String()
}

// runner decides a scenario's units in turn on one cycle state.
type runner struct {
	t          *testing.T
	ctx        context.Context
	cache      *snapshot.Cache
	st         *cycle.State
	groups     map[string]*lockv1.PodGroup
	priorities map[string]int32
	free       map[string][]device
	out        strings.Builder
	// now is the preemption search's clock (zero: none); shortWait its
	// short wait.
	now       time.Time
	shortWait time.Duration
}

// add puts a shape's pods (the first bound ones on their nodes) and claims
// in the cache.
func (r *runner) add(ud pods, ps []*corev1.Pod, claims []*resourcev1.ResourceClaim) {
	for i, p := range ps {
		if i < ud.Bound {
			bindOn(p, claims[i], ud.Nodes[i%len(ud.Nodes)], r.free)
		}
		r.cache.AddPod(p)
		if claims[i] != nil {
			r.cache.AddClaim(claims[i])
		}
	}
}

func (r *runner) preemption() (*Preemption, error) {
	cands := preemption.Candidates(r.cache.Pods(), func(ns, name string) (*lockv1.PodGroup, int32) {
		return r.groups[name], r.priorities[name]
	})
	preemption.Declare(cands, nil)
	return &Preemption{Candidates: cands, Now: r.now, ShortWait: r.shortWait}, nil
}

// assume records what a decision bound, as the scheduler's binder does.
func (r *runner) assume(asgs []placement.Assignment) {
	for _, a := range asgs {
		r.cache.AssumePod(a.Pod, a.Node, false)
		for _, c := range a.Claims {
			r.cache.AssumeClaim(c, false)
			take(r.free, c)
		}
	}
}

// unchanged checks Decide's contract: a unit that is not admitted leaves
// the snapshot as it found it (and so preemption searched the cluster as
// it is).
func (r *runner) unchanged(name string, kind Kind, before string, snap *snapshot.Snapshot) {
	if after := fingerprint(snap); after != before {
		r.t.Errorf("unit %s (%s) changed the snapshot:\n--- before ---\n%s--- after ---\n%s", name, kind, before, after)
	}
}

func (r *runner) unit(ud pods) {
	ps, claims, pg := build(ud)
	if pg != nil {
		r.groups[pg.Name], r.priorities[pg.Name] = pg, ud.Priority
	}
	r.add(ud, ps, claims)
	var u *podgroup.Unit
	key := queue.PodKey("ns", ps[0].Name)
	if pg != nil {
		u = podgroup.Resolve(pg, "ns", pg.Name, ps, nil)
		key = queue.GroupKey("ns", pg.Name)
	} else {
		u = podgroup.ResolvePod(ps[0], nil)
	}
	snap := r.st.Snapshot(r.ctx, key.String(), ud.Priority)
	before := fingerprint(snap)
	d := Decide(r.ctx, snap, r.st.CEL, Input{Unit: podgroup.Single(u), Priority: ud.Priority, Preemption: r.preemption})
	describe(&r.out, ud.Name, d)
	if d.Kind != Bind {
		r.unchanged(ud.Name, d.Kind, before, snap)
		return
	}
	r.assume(d.Result.Assignments)
}

// bindOn binds p to node as the API server would show it after an earlier
// cycle: running there, its claim (if any) allocated a device of the node
// taken from free, and reserved for it. It returns the claim.
func bindOn(p *corev1.Pod, claim *resourcev1.ResourceClaim, node string, free map[string][]device) *resourcev1.ResourceClaim {
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	if claim == nil {
		return nil
	}
	dev := free[node][0]
	free[node] = free[node][1:]
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: claim.Spec.Devices.Requests[0].Name, Driver: dev.driver, Pool: dev.pool, Device: dev.device,
	}}}}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
	return claim
}

// take removes the devices allocated to c from free.
func take(free map[string][]device, c *resourcev1.ResourceClaim) {
	for _, r := range c.Status.Allocation.Devices.Results {
		for node, devs := range free {
			free[node] = slices.DeleteFunc(devs, func(d device) bool {
				return d == device{r.Driver, r.Pool, r.Device}
			})
		}
	}
}

// fingerprint is what a cycle can change in a snapshot: per node what is
// requested, host ports and free devices; every allocated device; every
// claim's allocation and reservations.
func fingerprint(snap *snapshot.Snapshot) string {
	var b strings.Builder
	for _, ni := range snap.Nodes {
		r := ni.Requested
		scalars := make([]string, 0, len(r.Scalar))
		for n, v := range r.Scalar {
			scalars = append(scalars, fmt.Sprintf("%s=%d", n, v))
		}
		sort.Strings(scalars)
		ports := sets.List(ni.UsedPorts)
		fmt.Fprintf(&b, "node %s: cpu=%d mem=%d pods=%d %v ports=%v freeDevices=%d\n", ni.Node.Name, r.MilliCPU, r.Memory, r.Pods, scalars, ports, ni.FreeDevices())
	}
	devs := make([]string, 0, len(snap.Allocated))
	for id := range snap.Allocated {
		devs = append(devs, id.String())
	}
	sort.Strings(devs)
	fmt.Fprintf(&b, "allocated: %v\n", devs)
	keys := make([]string, 0, len(snap.Claims))
	for k, c := range snap.Claims {
		keys = append(keys, fmt.Sprintf("%s allocated=%t reservedFor=%d", k, c.Status.Allocation != nil, len(c.Status.ReservedFor)))
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintln(&b, "claim", k)
	}
	return b.String()
}

// build makes a shape's pods (with their claims, already generated from a
// template) and, for a group, its PodGroup.
func build(s pods) ([]*corev1.Pod, []*resourcev1.ResourceClaim, *lockv1.PodGroup) {
	var pg *lockv1.PodGroup
	switch {
	case s.MinCount > 0:
		pg = builders.GangPodGroup("ns", s.Name, s.MinCount)
	case s.Group:
		pg = &lockv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: s.Name}}
	}
	if pg != nil {
		for _, k := range s.Topology {
			if pg.Spec.SchedulingConstraints == nil {
				pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
			}
			pg.Spec.SchedulingConstraints.Topology = append(pg.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
		}
		pg.Annotations = map[string]string{}
		if len(s.Preferred) > 0 {
			pg.Annotations[lockv1.PreferredTopologyAnnotation] = strings.Join(s.Preferred, ",")
		}
		if s.Device != "" {
			pg.Annotations[lockv1.DeviceTopologyAnnotation] = s.Device
		}
		if s.CapacityTypes != "" {
			pg.Annotations[lockv1.CapacityTypesAnnotation] = s.CapacityTypes
		}
		if s.MaxRuntime != "" {
			pg.Annotations[lockv1.MaxRuntimeAnnotation] = s.MaxRuntime
		}
		if s.Checkpointed != "" {
			pg.Annotations[lockv1.CheckpointedAtAnnotation] = created.Add(mustDuration(s.Checkpointed)).UTC().Format(time.RFC3339)
		}
	}
	count := s.Count
	if count == 0 {
		count = 1
	}
	var out []*corev1.Pod
	var claims []*resourcev1.ResourceClaim
	for i := 0; i < count; i++ {
		name := fmt.Sprintf("%s-%d", s.Name, i)
		b := builders.MakePod().Namespace("ns").Name(name).Scheduler(lockv1.SchedulerName)
		if pg != nil {
			b = b.Member(s.Name)
		}
		if s.CPU != "" {
			b = b.Req(corev1.ResourceCPU, s.CPU)
		}
		var claim *resourcev1.ResourceClaim
		if s.GPUs > 0 {
			b = b.ClaimTemplate("gpu", "gpus")
			claim = builders.Claim("ns", name+"-gpu", "gpu.example.com", s.GPUs)
		}
		p := b.Obj()
		p.UID = types.UID(name)
		p.CreationTimestamp = metav1.NewTime(created)
		if s.Started != "" {
			p.Status.StartTime = ptr.To(metav1.NewTime(created.Add(mustDuration(s.Started))))
		}
		p.Spec.Priority = ptr.To(s.Priority)
		if i < s.Gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		}
		if claim != nil {
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
			claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: p.UID, Controller: ptr.To(true)}}
		}
		out, claims = append(out, p), append(claims, claim)
	}
	return out, claims, pg
}

// created is when every scenario pod was created.
var created = time.Unix(1e9, 0)

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

type device struct{ driver, pool, device string }

func freeDevices(slices []*resourcev1.ResourceSlice) map[string][]device {
	out := map[string][]device{}
	for _, sl := range slices {
		if sl.Spec.NodeName == nil {
			continue
		}
		for _, d := range sl.Spec.Devices {
			out[*sl.Spec.NodeName] = append(out[*sl.Spec.NodeName], device{sl.Spec.Driver, sl.Spec.Pool.Name, d.Name})
		}
	}
	return out
}

// describe writes a decision as the golden files hold it.
func describe(out *strings.Builder, name string, d Decision) {
	fmt.Fprintf(out, "%s: %s\n", name, d.Kind)
	if dom := d.Result.Domain; dom != "" && d.Kind == Bind {
		fmt.Fprintf(out, "  domain: %s\n", dom)
	}
	if d.Plan != nil && d.Plan.Placement.Domain != "" {
		fmt.Fprintf(out, "  domain: %s\n", d.Plan.Placement.Domain)
	}
	asgs := d.Result.Assignments
	if d.Plan != nil {
		asgs = d.Plan.Placement.Assignments
		var victims []string
		for _, v := range d.Plan.Victims {
			for _, p := range v.Pods {
				victims = append(victims, p.Name)
			}
		}
		sort.Strings(victims)
		fmt.Fprintf(out, "  evict: %s\n", strings.Join(victims, " "))
		if lost := d.Plan.WorkLost(); lost > 0 {
			fmt.Fprintf(out, "  work lost: %.2f device-hours\n", lost)
			for _, a := range d.Plan.Alternatives {
				fmt.Fprintf(out, "  costlier: %s: %d pods, %.2f device-hours\n", a.Domain, a.Pods, a.WorkLost)
			}
		}
		if !d.Plan.WaitUntil.IsZero() {
			var names []string
			for _, c := range d.Plan.Terminating {
				names = append(names, c.Name)
			}
			fmt.Fprintf(out, "  wait: until %s for %s, instead of %s\n", d.Plan.WaitUntil.Sub(created), strings.Join(names, ", "), d.Plan.Instead)
		}
	}
	lines := make([]string, 0, len(asgs))
	for _, a := range asgs {
		var devs []string
		for _, c := range a.Claims {
			for _, r := range c.Status.Allocation.Devices.Results {
				devs = append(devs, r.Pool+"/"+r.Device)
			}
		}
		lines = append(lines, fmt.Sprintf("  %s → %s %s", a.Pod.Name, a.Node, strings.Join(devs, " ")))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(out, strings.TrimRight(l, " "))
	}
	for _, s := range []struct{ label, v string }{{"summary", d.Summary}, {"reason", d.Reason}, {"waitReason", d.WaitReason}} {
		if s.v != "" {
			fmt.Fprintf(out, "  %s: %s\n", s.label, s.v)
		}
	}
	if d.Err != nil {
		fmt.Fprintf(out, "  error: %v\n", d.Err)
	}
}
