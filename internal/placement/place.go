package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// reasonCapacityFmt is why a node of a capacity type the group's policy
// excludes is not used.
const reasonCapacityFmt = "node(s) are %s capacity, which the group's capacity-types (%s) exclude"

// ErrMissingClaim means a member names a claim the snapshot does not have yet
// (e.g. kube-controller-manager has not created it from its template).
var ErrMissingClaim = errors.New("resource claim not in snapshot")

// maxOrders bounds how many signature orders a failing heterogeneous gang tries.
const maxOrders = 4

// Place places unit on snap. On success (or for a basic unit, for each pod
// placed) the snapshot keeps the placements assumed; a failed gang leaves
// the snapshot as it found it. An error means the unit could not be
// evaluated (SchedulerError), not that it does not fit.
func Place(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, unit Unit) (Result, error) {
	return place(ctx, snap, alloc, unit, false, nil)
}

// Simulate answers what Place would do but leaves the snapshot as it found
// it, success or not (a what-if, e.g. for preemption).
func Simulate(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, unit Unit) (Result, error) {
	return place(ctx, snap, alloc, unit, true, nil)
}

// place places unit (see Place); j, when set, records its changes (a
// tree's leaves share one journal, so the tree can rewind them).
func place(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, unit Unit, dry bool, j *journal) (Result, error) {
	if !unit.constrained() {
		return placeIn(ctx, snap, alloc, unit, scope{nodes: snap.Nodes}, dry, j)
	}
	plan := unit.plan(snap)
	if len(plan.Domains) == 0 {
		return failAll(unit, Diagnosis{Nodes: len(snap.Nodes), Reasons: plan.Excluded}), nil
	}
	// Every domain is tried from the same snapshot (a failed attempt
	// leaves it as it found it), so the members' signatures are the same
	// in each: computed once.
	sigs := signatures(snap, unit)
	if unit.elastic() && len(plan.Domains) > 1 {
		return placeElastic(ctx, snap, alloc, unit, plan, sigs, dry, j)
	}
	var best Result
	for _, d := range plan.Domains {
		res, err := placeDomain(ctx, snap, alloc, unit, plan, d, sigs, dry, j)
		if err != nil || Judge(unit, res).Admitted {
			return res, err
		}
		if best.Unplaced == nil || res.Placeable > best.Placeable {
			best = res
		}
	}
	return best, nil
}

func placeDomain(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, unit Unit, plan topology.Plan, d topology.Domain, sigs []string, dry bool, j *journal) (Result, error) {
	sc := within(snap, plan, d)
	sc.sigs = sigs
	res, err := placeIn(ctx, snap, alloc.Restrict(d.KeepDevice()), unit, sc, dry, j)
	res.Domain, res.domainNodes = d.String(), d.Nodes
	return res, err
}

// placeElastic places a gang with more pending members than it needs
// (minCount below its size) in the domain that accommodates the most of
// them, not the first that admits minCount: the first domain, in plan
// order (narrowest level, tightest), that holds every pending member;
// else the one that holds the most, the earlier on a tie. Each domain is
// tried as a what-if until one holds them all; the chosen one is then
// placed for real.
func placeElastic(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, unit Unit, plan topology.Plan, sigs []string, dry bool, j *journal) (Result, error) {
	var best, chosen Result
	at := -1
	for i, d := range plan.Domains {
		res, err := placeDomain(ctx, snap, alloc, unit, plan, d, sigs, true, j)
		if err != nil {
			return res, err
		}
		if !Judge(unit, res).Admitted {
			if at < 0 && (best.Unplaced == nil || res.Placeable > best.Placeable) {
				best = res
			}
			continue
		}
		if at < 0 || len(res.Assignments) > len(chosen.Assignments) {
			at, chosen = i, res
		}
		if len(res.Assignments) == len(unit.Members) {
			break
		}
	}
	if at < 0 {
		return best, nil
	}
	if dry {
		return chosen, nil
	}
	return placeDomain(ctx, snap, alloc, unit, plan, plan.Domains[at], sigs, false, j)
}

// scope is where a unit's members are placed: nodes, open nodes only
// members that hold no device may use (topology.Domain.Open; openReason
// says why the others may not), and, by reason, the nodes of the snapshot
// outside both.
type scope struct {
	nodes, open []*snapshot.NodeInfo
	openReason  string
	outside     map[string]int
	// sigs are the members' signatures when known (signatures): the same
	// in every domain one placement tries.
	sigs []string
}

// within is the scope of domain d of plan.
func within(snap *snapshot.Snapshot, plan topology.Plan, d topology.Domain) scope {
	return scope{nodes: d.Nodes, open: d.Open, openReason: topology.NoDevice(d.Attribute), outside: outside(snap, plan, d)}
}

// outside counts, by reason, the nodes of snap not in d: those no domain
// of the plan holds, and the others.
func outside(snap *snapshot.Snapshot, plan topology.Plan, d topology.Domain) map[string]int {
	out := make(map[string]int, len(plan.Excluded)+1)
	rest := len(snap.Nodes) - len(d.Nodes) - len(d.Open)
	for r, n := range plan.Excluded {
		out[r] = n
		rest -= n
	}
	if rest > 0 {
		out[fmt.Sprintf(reasonOutsideDomainFmt, d)] = rest
	}
	return out
}

func placeIn(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, unit Unit, sc scope, dry bool, j *journal) (Result, error) {
	groups, err := buildGroups(ctx, snap, unit, sc)
	if err != nil {
		return Result{}, err
	}
	if !unit.Gang {
		a := newAttempt(ctx, snap, alloc, unit, dry, j)
		return a.run(groups)
	}
	var best Result
	all := orders(groups)
	for i, order := range all {
		if i == maxOrders {
			break
		}
		a := newAttempt(ctx, snap, alloc, unit, dry, j)
		res, err := a.run(order)
		if err != nil || len(res.Assignments) > 0 {
			return res, err
		}
		if best.Unplaced == nil || res.Placeable > best.Placeable {
			best = res
		}
		for _, g := range groups {
			g.reset()
		}
	}
	need := max(unit.MinCount-unit.Bound, 1)
	if !needsSearch(groups, unit) || !mayHold(snap, groups, need) {
		return best, nil
	}
	// Greedy is not complete here (several signatures, or pods that
	// constrain each other): search.
	a := newAttempt(ctx, snap, alloc, unit, dry, j)
	res, exhausted, err := a.searchGang(all[0], need)
	if err != nil {
		return Result{}, err
	}
	if Judge(unit, res).Admitted {
		if dry {
			a.rollback()
		}
		return res, nil
	}
	a.rollback()
	best.SearchExhausted = exhausted
	return best, nil
}

// group is the members of one signature and the nodes that can take them.
type group struct {
	members []int
	req     snapshot.Resources
	ports   []string
	claims  bool
	// dra are the extended resources of req that DeviceClasses serve.
	dra []corev1.ResourceName
	// devices is a lower bound of the devices one member needs allocated
	// (its own unallocated claims' exact counts, its DRA-served extended
	// resources).
	devices int
	// feasible are the nodes that can take the members, in no order;
	// order is the order members try them in (tightest).
	feasible []*snapshot.NodeInfo
	order    tightest
	static   Diagnosis
	// cursor: the order's nodes before cursor are full for this signature
	// this attempt; fullAt[i] is why the order's i-th node is full (""
	// while it is not), full counts the full ones by reason.
	cursor int
	fullAt []string
	full   map[string]int
}

func newGroup(snap *snapshot.Snapshot, m Member, claims bool) *group {
	g := &group{req: snap.Requests(m.Pod), ports: snapshot.HostPorts(m.Pod)}
	g.dra = draResources(snap, g.req)
	g.claims = claims || len(g.dra) > 0
	g.reset()
	return g
}

// holdsDevice reports whether the signature's members are allocated
// devices: resource claims, or extended resources (a device plugin's or a
// DeviceClass's).
func (g *group) holdsDevice() bool {
	if g.claims {
		return true
	}
	for name := range g.req.Scalar {
		if v1helper.IsExtendedResourceName(name) {
			return true
		}
	}
	return false
}

func (g *group) reset() {
	g.cursor = 0
	if len(g.fullAt) != len(g.feasible) {
		g.fullAt = make([]string, len(g.feasible))
	} else {
		clear(g.fullAt)
	}
	if g.full == nil {
		g.full = map[string]int{}
	} else {
		clear(g.full)
	}
}

// hopeless reports the nodes that cannot hold one of the group's members
// as an attempt starts: too little free of what a member requests, a host
// port taken, fewer free devices than a member's own claims need (own).
func (g *group) hopeless(snap *snapshot.Snapshot, own int) func(*snapshot.NodeInfo) bool {
	return func(ni *snapshot.NodeInfo) bool {
		if name, port := g.lacks(snap, ni); name != "" || port {
			return true
		}
		return own > 0 && len(snap.GlobalSlices) == 0 && ni.FreeDevices() < own
	}
}

// markFull records that the order's i-th node has no room left for the
// signature.
func (g *group) markFull(i int, reason string) {
	g.fullAt[i] = reason
	g.full[reason]++
	for g.cursor < len(g.feasible) && g.fullAt[g.cursor] != "" {
		g.cursor++
	}
}

// signatures are the members' signatures (memberSignature), nil when a
// member's claims cannot be resolved (buildGroups says so).
func signatures(snap *snapshot.Snapshot, unit Unit) []string {
	uses := claimUses(unit)
	out := make([]string, len(unit.Members))
	for i, m := range unit.Members {
		claims, err := resolve(snap, m)
		if err != nil {
			return nil
		}
		out[i] = memberSignature(snap, unit, i, claims, uses)
	}
	return out
}

// claimUses counts the members that name each claim.
func claimUses(unit Unit) map[types.NamespacedName]int {
	uses := map[types.NamespacedName]int{}
	for _, m := range unit.Members {
		for _, key := range m.Claims {
			uses[key]++
		}
	}
	return uses
}

// memberSignature is a member's signature: members of one are
// interchangeable. Claims several members share pin them together; a claim
// only one member uses is, unallocated, as interchangeable as a template's.
func memberSignature(snap *snapshot.Snapshot, unit Unit, i int, claims []*resourcev1.ResourceClaim, uses map[types.NamespacedName]int) string {
	m := unit.Members[i]
	return unit.Signatures.signature(i, m.Pod, claims, snap.Features, func() string {
		return signatureOf(m.Pod, snap.Requests(m.Pod), claims, snap.Features, func(c *resourcev1.ResourceClaim) bool {
			return uses[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] > 1
		})
	})
}

// buildGroups groups the members by signature and filters the nodes of sc
// for each signature: its open nodes only for members that hold no device.
func buildGroups(ctx context.Context, snap *snapshot.Snapshot, unit Unit, sc scope) ([]*group, error) {
	logger := klog.FromContext(ctx)
	bySig := map[string]*group{}
	var groups []*group
	uses := claimUses(unit)
	for i, m := range unit.Members {
		claims, err := resolve(snap, m)
		if err != nil {
			return nil, err
		}
		var sig string
		if sc.sigs != nil {
			sig = sc.sigs[i]
		} else {
			sig = memberSignature(snap, unit, i, claims, uses)
		}
		if g := bySig[sig]; g != nil {
			g.members = append(g.members, i)
			continue
		}
		g := newGroup(snap, m, len(claims) > 0)
		own := devicesNeeded(m.Pod, claims)
		g.devices = own
		for _, name := range g.dra {
			g.devices += int(g.req.Scalar[name])
		}
		g.members = []int{i}
		g.static.Nodes = len(snap.Nodes)
		aff := nodeaffinity.GetRequiredNodeAffinity(m.Pod)
		features, err := requiredFeatures(m.Pod, snap.Features)
		if err != nil {
			return nil, err
		}
		nodes := sc.nodes
		switch {
		case len(sc.open) == 0:
		case g.holdsDevice():
			g.static.add(sc.openReason, len(sc.open))
		default:
			nodes = append(slices.Clip(nodes), sc.open...)
		}
		capacity := unit.CapacityTypes
		if capacity.AllowsAll() {
			capacity = nil
		}
		g.feasible = make([]*snapshot.NodeInfo, 0, len(nodes))
		for _, ni := range nodes {
			if capacity != nil {
				if t := ni.CapacityType(); !capacity.Allows(t) {
					g.static.add(fmt.Sprintf(reasonCapacityFmt, t, capacity), 1)
					continue
				}
			}
			reason, err := staticFilter(logger, m.Pod, aff, features, snap.ReservedFor, ni.Node)
			if err != nil {
				return nil, err
			}
			if reason != "" {
				g.static.add(reason, 1)
				continue
			}
			g.feasible = append(g.feasible, ni)
		}
		for r, n := range sc.outside {
			g.static.add(r, n)
		}
		g.order = newTightest(g.feasible, g.claims, preferences(logger, m.Pod), g.hopeless(snap, own))
		g.reset()
		bySig[sig] = g
		groups = append(groups, g)
	}
	return groups, nil
}

func resolve(snap *snapshot.Snapshot, m Member) ([]*resourcev1.ResourceClaim, error) {
	claims := make([]*resourcev1.ResourceClaim, 0, len(m.Claims))
	for _, key := range m.Claims {
		c := snap.Claims[key]
		if c == nil {
			return nil, fmt.Errorf("%w: %s (pod %s)", ErrMissingClaim, key, klog.KObj(m.Pod))
		}
		claims = append(claims, c)
	}
	return claims, nil
}

// preference is how much a pod prefers a node, from what kube-scheduler
// scores without looking at other pods: the weights of the preferred node
// affinity terms the node matches (NodeAffinity), and the PreferNoSchedule
// taints the pod does not tolerate (TaintToleration).
type preference struct {
	affinity    int64
	intolerable int
}

func (p preference) better(o preference) bool {
	if p.affinity != o.affinity {
		return p.affinity > o.affinity
	}
	return p.intolerable < o.intolerable
}

// preferences returns the pod's preference function, nil when it has no
// preferred node affinity and no toleration changes anything.
func preferences(logger klog.Logger, pod *corev1.Pod) func(*corev1.Node) preference {
	var terms *nodeaffinity.PreferredSchedulingTerms
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		t, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		if err == nil {
			terms = t
		}
	}
	return func(n *corev1.Node) preference {
		var p preference
		if terms != nil {
			p.affinity = terms.Score(n)
		}
		for i := range n.Spec.Taints {
			t := &n.Spec.Taints[i]
			if t.Effect == corev1.TaintEffectPreferNoSchedule && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, t, true) {
				p.intolerable++
			}
		}
		return p
	}
}

// orders yields the signature orders to try: most constrained first, then
// each other group moved to the front.
func orders(groups []*group) [][]*group {
	base := append([]*group(nil), groups...)
	sort.SliceStable(base, func(i, j int) bool { return len(base[i].feasible) < len(base[j].feasible) })
	out := [][]*group{base}
	for i := 1; i < len(base); i++ {
		o := append([]*group{base[i]}, append(append([]*group(nil), base[:i]...), base[i+1:]...)...)
		out = append(out, o)
	}
	return out
}

// Feasible returns the nodes of the unit's domains (all nodes without
// topology) that pass the checks no eviction can change (schedulability,
// node name, selector and affinity, taints) for at least one member: the
// only nodes where freeing capacity can help the unit.
func Feasible(ctx context.Context, snap *snapshot.Snapshot, unit Unit) (sets.Set[string], error) {
	sc := scope{nodes: snap.Nodes}
	if unit.constrained() {
		sc.nodes = nil
		seen := map[*snapshot.NodeInfo]bool{}
		domains := unit.plan(snap).Domains
		for _, d := range domains {
			for _, ni := range d.Nodes {
				if !seen[ni] {
					seen[ni] = true
					sc.nodes = append(sc.nodes, ni)
				}
			}
		}
		for _, d := range domains {
			for _, ni := range d.Open {
				if !seen[ni] {
					seen[ni] = true
					sc.open = append(sc.open, ni)
				}
			}
		}
	}
	groups, err := buildGroups(ctx, snap, unit, sc)
	if err != nil {
		return nil, err
	}
	out := sets.New[string]()
	for _, g := range groups {
		for _, ni := range g.feasible {
			out.Insert(ni.Node.Name)
		}
	}
	return out, nil
}

// NodeVerdicts evaluates one pod on every node of snap as a lone pod's
// cycle would: "" where it fits, else the first reason the node fails
// (static checks, then capacity, then pod constraints, then devices). It
// leaves the snapshot as it found it.
func NodeVerdicts(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, m Member) (map[string]string, error) {
	logger := klog.FromContext(ctx)
	unit := Unit{Members: []Member{m}}
	g := newGroup(snap, m, len(m.Claims) > 0)
	var check snapshot.PodCheck
	if snap.Constraints != nil {
		var err error
		if check, err = snap.Constraints.Prepare(ctx, m.Pod); err != nil {
			return nil, err
		}
	}
	aff := nodeaffinity.GetRequiredNodeAffinity(m.Pod)
	features, err := requiredFeatures(m.Pod, snap.Features)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(snap.Nodes))
	for _, ni := range snap.Nodes {
		reason, err := staticFilter(logger, m.Pod, aff, features, snap.ReservedFor, ni.Node)
		if err != nil {
			return nil, err
		}
		if reason == "" {
			reason = g.fits(snap, ni)
		}
		if reason == "" && check != nil {
			if reason, err = check.Check(ctx, ni.Node.Name); err != nil {
				return nil, err
			}
		}
		if reason == "" {
			a := newAttempt(ctx, snap, alloc, unit, true, nil)
			asg, r, err := a.tryNode(g, m, ni)
			if err != nil {
				return nil, err
			}
			a.rollback()
			if asg == nil {
				reason = r
			}
		}
		out[ni.Node.Name] = reason
	}
	return out, nil
}

// devicesNeeded is a lower bound of the devices a pod's claims still need:
// the fewest devices (dra.LeastDevices) of the unallocated claims only it
// uses.
func devicesNeeded(pod *corev1.Pod, claims []*resourcev1.ResourceClaim) int {
	n := 0
	for _, c := range claims {
		if c.Status.Allocation != nil || len(c.OwnerReferences) == 0 || c.OwnerReferences[0].UID != pod.UID {
			continue
		}
		n += int(dra.LeastDevices(&c.Spec))
	}
	return n
}
