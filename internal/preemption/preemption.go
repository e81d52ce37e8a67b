package preemption

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// Candidate is what is evicted as one piece: a whole PodGroup
// (disruptionMode all), the subtree of a scheduling tree its groups'
// disruptionMode ties them to, or one pod (a lone pod, or a member of a
// group with disruptionMode single).
type Candidate struct {
	// Name is how events name it: "PodGroup ns/name" or "pod ns/name".
	Name string
	// Group is the PodGroup the pods belong to; empty for a lone pod or a
	// tree.
	Group types.NamespacedName
	// Tree is the CompositePodGroup whose subtree the pods are, taken whole
	// with it (disruptionMode all); empty for anything else.
	Tree types.NamespacedName
	// Priority of the group (PodGroup priority over pod priority), or of the pod.
	Priority int32
	// Pods are the candidate's pods that hold a node.
	Pods []*corev1.Pod
	// Whole: the candidate is a group taken whole (disruptionMode all).
	Whole bool
	// ProtectedUntil: the candidate is no victim before then (its minimum
	// runtime, counted from its newest pod's start; zero: none).
	ProtectedUntil time.Time
	// Notice is how long the candidate is given to checkpoint before it is
	// evicted (0: evicted at once).
	Notice time.Duration
	// NoticeDeadline is when the notice it was already given ends (its
	// pods' lockv1.PreemptionPendingAnnotation); zero while it has none.
	NoticeDeadline time.Time
	// Annotations are its PodGroup's, or its CompositePodGroup's for a
	// tree (none for a lone pod): its declared terms.
	Annotations map[string]string
	// EndsBy is when it ends at the latest, as declared: its pods'
	// spec.activeDeadlineSeconds, or its group's
	// lockv1.MaxRuntimeAnnotation, from its start (zero: not declared).
	EndsBy time.Time
	// Checkpointed is when it last saved its work
	// (lockv1.CheckpointedAtAnnotation on its group or a pod); zero: never.
	Checkpointed time.Time
}

// Terms are what a candidate's eviction may cost it: a minimum runtime
// and a notice.
type Terms struct {
	MinRuntime, Notice time.Duration
}

// Declare sets each candidate's terms — its group's annotations
// (lockv1.MinRuntimeAnnotation, lockv1.PreemptionNoticeAnnotation), else
// defaults for it (its PriorityClass's; nil: none): ProtectedUntil from
// its minimum runtime, counted from when its newest pod started (a gang
// restarted whole runs its minimum again); its notice, and the notice it
// already has; and its last checkpoint, the latest its group or a pod
// reports.
func Declare(cs []Candidate, defaults func(Candidate) Terms) {
	for i := range cs {
		c := &cs[i]
		var t Terms
		if defaults != nil {
			t = defaults(*c)
		}
		if d, ok := podgroup.MinRuntime(c.Annotations); ok {
			t.MinRuntime = d
		}
		if d, ok := podgroup.PreemptionNotice(c.Annotations); ok {
			t.Notice = d
		}
		if t.MinRuntime > 0 {
			c.ProtectedUntil = c.started().Add(t.MinRuntime)
		}
		c.EndsBy = time.Time{}
		if d, ok := podgroup.MaxRuntime(c.Annotations); ok {
			c.EndsBy = c.started().Add(d)
		}
		for _, p := range c.Pods {
			if ads := p.Spec.ActiveDeadlineSeconds; ads != nil && p.Status.StartTime != nil {
				if end := p.Status.StartTime.Add(time.Duration(*ads) * time.Second); c.EndsBy.IsZero() || end.Before(c.EndsBy) {
					c.EndsBy = end
				}
			}
		}
		c.Notice = t.Notice
		c.Checkpointed = podgroup.TimeAnnotation(c.Annotations, lockv1.CheckpointedAtAnnotation)
		for _, p := range c.Pods {
			if at := podgroup.TimeAnnotation(p.Annotations, lockv1.CheckpointedAtAnnotation); at.After(c.Checkpointed) {
				c.Checkpointed = at
			}
			if d := podgroup.TimeAnnotation(p.Annotations, lockv1.PreemptionPendingAnnotation); !d.IsZero() && (c.NoticeDeadline.IsZero() || d.Before(c.NoticeDeadline)) {
				c.NoticeDeadline = d
			}
		}
	}
}

// NoticeOver reports whether a candidate with notice may be evicted now:
// it was given notice and has acknowledged it (checkpointed after the
// notice began) or the notice has ended.
func (c Candidate) NoticeOver(now time.Time) bool {
	if c.NoticeDeadline.IsZero() {
		return false
	}
	return !now.Before(c.NoticeDeadline) || c.Checkpointed.After(c.NoticeDeadline.Add(-c.Notice))
}

// Terminating reports whether every pod is already being deleted.
func (c Candidate) Terminating() bool {
	for _, p := range c.Pods {
		if p.DeletionTimestamp == nil {
			return false
		}
	}
	return len(c.Pods) > 0
}

// lastSaved is when the candidate's work was last saved: its last
// checkpoint, or its newest pod's start when that is later or it reported
// none.
func (c Candidate) lastSaved() time.Time {
	if s := c.started(); !c.Checkpointed.After(s) {
		return s
	}
	return c.Checkpointed
}

// started is when the candidate's newest pod started (least work is lost by
// evicting what started last).
func (c Candidate) started() time.Time {
	var t time.Time
	for _, p := range c.Pods {
		s := p.CreationTimestamp.Time
		if p.Status.StartTime != nil {
			s = p.Status.StartTime.Time
		}
		if s.After(t) {
			t = s
		}
	}
	return t
}

// Input is one preemption question.
type Input struct {
	// Unit is the preemptor as placement sees it.
	Unit placement.Unit
	// Tree, when set, is the preemptor instead of Unit: a scheduling tree,
	// which fits when placement.SimulateTree admits it.
	Tree *placement.TreeNode
	// Priority of the preemptor.
	Priority int32
	// Candidates: everything running, any priority; Find keeps the relevant
	// ones of strictly lower priority.
	Candidates []Candidate
	// PDBs are honoured where a choice exists.
	PDBs []*policyv1.PodDisruptionBudget
	// Stuck are pods evicted before that did not go: they are neither
	// counted on nor evicted again.
	Stuck sets.Set[types.UID]
	// Now is the time candidates' protection (ProtectedUntil) is judged
	// at.
	Now time.Time
	// ShortWait is the longest the unit waits for candidates that declared
	// their end (EndsBy) instead of evicting others, when waiting costs
	// less than the victims would lose (0: never waits).
	ShortWait time.Duration
}

// Plan is a preemption that makes the unit fit.
type Plan struct {
	// Victims are to be evicted now; empty when Terminating suffice.
	Victims []Candidate
	// Terminating are lower-priority candidates already going that the
	// plan counts on.
	Terminating []Candidate
	// Placement is the unit placed as if the victims were gone: the
	// capacity the preemptor is nominated for.
	Placement placement.Result
	// ViolatedPDBs are "ns/name" of budgets the victims exceed.
	ViolatedPDBs []string
	// Considered is how many lower-priority candidates were relevant.
	Considered int
	// Simulations is how many placement simulations the search ran.
	Simulations int
	// workLost is the device-hours the victims lose (WorkLost).
	workLost float64
	// WaitUntil, set, says no one is evicted: the Terminating candidates
	// end by then as they declared (EndsBy), and waiting for them costs
	// less than the eviction would (Instead says which).
	WaitUntil time.Time
	// Instead is the eviction a short wait avoids, as Describe words it,
	// and what it would lose.
	Instead string
	// Alternatives are the other candidate sets the search weighed (one
	// per topology domain the unit may use), costlier than this one.
	Alternatives []Alternative
}

// An Alternative is a candidate set the search found costlier.
type Alternative struct {
	// Domain is where its placement would be.
	Domain string
	// Victims describes it as Describe does.
	Victims string
	Pods    int
	// WorkLost is its device-hours lost.
	WorkLost float64
}

// Describe names the victims: "PodGroup ns/low (4 pods, priority 100), …".
func (p *Plan) Describe() string {
	var parts []string
	for _, v := range p.Victims {
		parts = append(parts, fmt.Sprintf("%s (%d pods, priority %d)", v.Name, len(v.Pods), v.Priority))
	}
	if len(parts) > 5 {
		parts = append(parts[:5], fmt.Sprintf("and %d more", len(parts)-5))
	}
	return strings.Join(parts, ", ")
}

// VictimPods counts the pods of the victims.
func (p *Plan) VictimPods() int {
	n := 0
	for _, v := range p.Victims {
		n += len(v.Pods)
	}
	return n
}

// Find returns a plan, or nil and why preemption cannot help. It leaves
// snap as it found it. A unit with required topology is searched one
// required domain at a time — its victims are never spread over domains
// it cannot use together — and the cheapest domain's plan is returned
// (cheaper).
func Find(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, in Input) (*Plan, string, error) {
	domains := requiredDomains(snap, in.Unit)
	if len(domains) <= 1 || in.Tree != nil {
		return find(ctx, snap, alloc, in)
	}
	var best *Plan
	var found []*Plan
	why := ""
	for _, d := range domains {
		din := in
		din.Unit.Domains = []topology.Domain{d}
		p, w, err := find(ctx, snap, alloc, din)
		if err != nil {
			return nil, "", err
		}
		if p == nil {
			why = w
			continue
		}
		if best == nil || cheaper(p, best) {
			best = p
		}
		found = append(found, p)
	}
	if best == nil {
		return nil, fmt.Sprintf("in none of the %d topology domains the unit may use (e.g. %s: %s)", len(domains), domains[len(domains)-1], why), nil
	}
	for _, p := range found {
		if p != best {
			best.Alternatives = append(best.Alternatives, Alternative{Domain: p.Placement.Domain, Victims: p.Describe(), Pods: p.VictimPods(), WorkLost: p.workLost})
		}
	}
	return best, "", nil
}

// feasibleNodes are the nodes where freeing capacity can help the
// preemptor: its own, or any of its tree's leaves'.
func feasibleNodes(ctx context.Context, snap *snapshot.Snapshot, in Input) (sets.Set[string], error) {
	if in.Tree == nil {
		return placement.Feasible(ctx, snap, in.Unit)
	}
	out := sets.New[string]()
	var err error
	in.Tree.Walk(func(n *placement.TreeNode) {
		if n.Leaf == nil || err != nil {
			return
		}
		var f sets.Set[string]
		if f, err = placement.Feasible(ctx, snap, *n.Leaf); err == nil {
			out = out.Union(f)
		}
	})
	return out, err
}

// requiredDomains are the required domains of the unit's plan (a unit
// whose running members pin it has one).
func requiredDomains(snap *snapshot.Snapshot, u placement.Unit) []topology.Domain {
	if len(u.Domains) > 0 || len(u.Topology.Required) == 0 && u.Topology.DeviceAttribute == "" {
		return nil
	}
	var out []topology.Domain
	for _, d := range topology.PlanFor(snap, u.Topology, u.Running).Domains {
		if d.Level == "" {
			out = append(out, d)
		}
	}
	return out
}

// cheaper reports whether plan p costs less than q: victims of lower
// priority, fewer budgets violated, less work lost (device-hours since
// the victims' last checkpoints), fewer pods evicted, fewer groups, the
// most recently started.
func cheaper(p, q *Plan) bool {
	pp, qp := maxPriority(p.Victims), maxPriority(q.Victims)
	switch {
	case len(p.Victims) == 0 || len(q.Victims) == 0:
		return len(p.Victims) < len(q.Victims)
	case pp != qp:
		return pp < qp
	case len(p.ViolatedPDBs) != len(q.ViolatedPDBs):
		return len(p.ViolatedPDBs) < len(q.ViolatedPDBs)
	case p.workLost != q.workLost:
		return p.workLost < q.workLost
	case p.VictimPods() != q.VictimPods():
		return p.VictimPods() < q.VictimPods()
	case len(p.Victims) != len(q.Victims):
		return len(p.Victims) < len(q.Victims)
	}
	return oldest(p.Victims).After(oldest(q.Victims))
}

func maxPriority(cs []Candidate) int32 {
	var m int32
	for i, c := range cs {
		if i == 0 || c.Priority > m {
			m = c.Priority
		}
	}
	return m
}

// oldest is when the earliest-started victim started.
func oldest(cs []Candidate) time.Time {
	var t time.Time
	for i, c := range cs {
		if s := c.started(); i == 0 || s.Before(t) {
			t = s
		}
	}
	return t
}

func find(ctx context.Context, snap *snapshot.Snapshot, alloc *dra.Allocator, in Input) (*Plan, string, error) {
	if in.Unit.Signatures == nil {
		// The search places the unit tens of times; its members are the
		// same each time.
		in.Unit.Signatures = placement.NewSignatures()
	}
	feasible, err := feasibleNodes(ctx, snap, in)
	if err != nil {
		return nil, "", err
	}
	if feasible.Len() == 0 {
		return nil, "no node passes the unit's selector, affinity and taints: preemption cannot help", nil
	}
	sim := newSimulation(ctx, snap, alloc, in.Unit, in.Tree)
	globalPools := globalPools(snap)
	var going, others, protected []Candidate
	for _, c := range in.Candidates {
		if c.Priority >= in.Priority || stuck(c, in.Stuck) || !relevant(c, feasible, globalPools, snap) {
			continue
		}
		if !c.Terminating() && c.ProtectedUntil.After(in.Now) {
			protected = append(protected, c)
			continue
		}
		if c.Terminating() {
			going = append(going, c)
		} else {
			others = append(others, c)
		}
	}
	considered := len(going) + len(others)
	if considered == 0 {
		if len(protected) > 0 {
			return nil, "the lower-priority units on the nodes the unit can use are within their minimum runtime: " + describeProtected(protected), nil
		}
		return nil, "no running pods of lower priority on the nodes the unit can use", nil
	}
	for _, c := range going {
		sim.remove(c)
	}
	defer func() {
		for _, c := range going {
			sim.restore(c)
		}
	}()
	plan := &Plan{Terminating: going, Considered: considered}
	if res, ok, err := sim.fits(); err != nil || ok {
		plan.Placement = res
		return plan, "", err
	}
	pdb := newBudgets(in.PDBs)
	sortCheapestFirst(others, pdb)
	for _, c := range others {
		sim.remove(c)
	}
	if _, ok, err := sim.fits(); err != nil || !ok {
		for _, c := range others {
			sim.restore(c)
		}
		why := fmt.Sprintf("evicting all %d lower-priority candidates would not make room", len(others))
		if len(protected) > 0 {
			why += "; more are within their minimum runtime: " + describeProtected(protected)
		}
		return nil, why, err
	}
	// others are all removed; find the shortest prefix that fits.
	n, err := sim.shortestPrefix(others)
	if err != nil {
		return nil, "", err
	}
	prefix := others[:n]
	// Candidates the fitting placement does not touch are put back at once;
	// then the rest are put back most valuable first while the unit fits.
	res, _, err := sim.fits()
	if err != nil {
		return nil, "", err
	}
	untouched, touched := splitByUse(snap, prefix, res)
	for _, c := range untouched {
		sim.restore(c)
	}
	if len(untouched) > 0 {
		if _, ok, err := sim.fits(); err != nil || !ok {
			// The placement moved elsewhere: keep them out and reprieve all.
			for _, c := range untouched {
				sim.remove(c)
			}
			touched = prefix
		}
	}
	valuable := make([]Candidate, len(touched))
	for i := range touched {
		valuable[i] = touched[len(touched)-1-i]
	}
	victims, err := sim.reprieve(valuable, false)
	if err != nil {
		return nil, "", err
	}
	res, ok, err := sim.fits()
	for _, v := range victims {
		sim.restore(v)
	}
	if err != nil || !ok {
		return nil, "preemption search lost its fit (placement is not monotone here); evicting nothing", err
	}
	plan.Victims = victims
	plan.Placement = res
	plan.Simulations = sim.fitChecks
	plan.ViolatedPDBs = pdb.violated(victims)
	for _, v := range victims {
		plan.workLost += workLost(snap, v, in.Now)
	}
	if w, err := shortWait(snap, sim, in, plan); err != nil || w != nil {
		return w, "", err
	}
	return plan, "", nil
}

// describeProtected names candidates within their minimum runtime and
// when each becomes a victim, soonest first: "PodGroup ml/a until
// 2026-12-04T10:30:00Z, …".
func describeProtected(cs []Candidate) string {
	sorted := append([]Candidate(nil), cs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ProtectedUntil.Before(sorted[j].ProtectedUntil) })
	var parts []string
	for i, c := range sorted {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(sorted)-3))
			break
		}
		parts = append(parts, fmt.Sprintf("%s until %s", c.Name, c.ProtectedUntil.UTC().Format(time.RFC3339)))
	}
	return strings.Join(parts, ", ")
}

// ProtectionEnds is when the first of the candidates of lower priority
// than prio that are protected at now becomes a victim (zero: none is).
func ProtectionEnds(cs []Candidate, prio int32, now time.Time) time.Time {
	var first time.Time
	for _, c := range cs {
		if c.Priority < prio && c.ProtectedUntil.After(now) && (first.IsZero() || c.ProtectedUntil.Before(first)) {
			first = c.ProtectedUntil
		}
	}
	return first
}

func stuck(c Candidate, s sets.Set[types.UID]) bool {
	for _, p := range c.Pods {
		if s.Has(p.UID) {
			return true
		}
	}
	return false
}

// relevant: some pod runs on a node the unit can use, or holds a device
// that is not node-local.
func relevant(c Candidate, feasible sets.Set[string], global sets.Set[string], snap *snapshot.Snapshot) bool {
	for _, p := range c.Pods {
		if feasible.Has(p.Spec.NodeName) {
			return true
		}
		if global.Len() == 0 {
			continue
		}
		for _, claim := range podClaims(snap, p) {
			for _, r := range claim.Status.Allocation.Devices.Results {
				if global.Has(r.Driver + "/" + r.Pool) {
					return true
				}
			}
		}
	}
	return false
}

func globalPools(snap *snapshot.Snapshot) sets.Set[string] {
	out := sets.New[string]()
	for _, s := range snap.GlobalSlices {
		out.Insert(s.Spec.Driver + "/" + s.Spec.Pool.Name)
	}
	return out
}

// sortCheapestFirst orders candidates by what evicting them costs:
// priority, budgets, the work each device they free loses — the most
// recently saved first (last checkpoint, or start without one) — then
// the fewest pods. (Ordered by each candidate's total work lost, a search
// for k devices takes many small fresh jobs before one large one and
// evicts more in all: on the simulated week, 70 % more pods and 27 % more
// device-hours. The candidate set as a whole is weighed by its total:
// cheaper.)
func sortCheapestFirst(cs []Candidate, pdb *budgets) {
	type key struct {
		protected bool
		saved     time.Time
		started   time.Time
	}
	keys := make(map[string]key, len(cs))
	for _, c := range cs {
		keys[c.Name] = key{protected: len(pdb.violated([]Candidate{c})) > 0, saved: c.lastSaved(), started: c.started()}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		ka, kb := keys[a.Name], keys[b.Name]
		switch {
		case a.Priority != b.Priority:
			return a.Priority < b.Priority
		case ka.protected != kb.protected:
			return !ka.protected
		case !ka.saved.Equal(kb.saved):
			return ka.saved.After(kb.saved)
		case !ka.started.Equal(kb.started):
			return ka.started.After(kb.started)
		case len(a.Pods) != len(b.Pods):
			return len(a.Pods) < len(b.Pods)
		}
		return a.Name < b.Name
	})
}

// budgets counts, per PodDisruptionBudget, how many disruptions are left.
type budgets struct {
	pdbs []*policyv1.PodDisruptionBudget
	sels []labels.Selector
}

func newBudgets(pdbs []*policyv1.PodDisruptionBudget) *budgets {
	b := &budgets{}
	for _, p := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		b.pdbs = append(b.pdbs, p)
		b.sels = append(b.sels, sel)
	}
	return b
}

// violated lists the budgets that evicting the candidates would exceed.
func (b *budgets) violated(cs []Candidate) []string {
	var out []string
	for i, p := range b.pdbs {
		n := int32(0)
		for _, c := range cs {
			for _, pod := range c.Pods {
				if pod.Namespace == p.Namespace && pod.DeletionTimestamp == nil && b.sels[i].Matches(labels.Set(pod.Labels)) {
					n++
				}
			}
		}
		if n > p.Status.DisruptionsAllowed {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out
}

// splitByUse separates candidates whose pods sit on no node the placement
// uses and hold no device it allocates from those that may matter.
func splitByUse(snap *snapshot.Snapshot, cs []Candidate, res placement.Result) (untouched, touched []Candidate) {
	nodes := sets.New[string]()
	devices := sets.New[string]()
	for _, a := range res.Assignments {
		nodes.Insert(a.Node)
		for _, c := range a.Claims {
			if c.Status.Allocation == nil {
				continue
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				devices.Insert(r.Driver + "/" + r.Pool + "/" + r.Device)
			}
		}
	}
	for _, c := range cs {
		used := false
		for _, p := range c.Pods {
			if nodes.Has(p.Spec.NodeName) {
				used = true
				break
			}
			for _, claim := range podClaims(snap, p) {
				for _, r := range claim.Status.Allocation.Devices.Results {
					if devices.Has(r.Driver + "/" + r.Pool + "/" + r.Device) {
						used = true
					}
				}
			}
		}
		if used {
			touched = append(touched, c)
		} else {
			untouched = append(untouched, c)
		}
	}
	return untouched, touched
}
