package simulate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// unitRun is what the scheduler's queue holds: a PodGroup, or a pod that
// is a unit of its own.
type unitRun struct {
	key   string
	job   *jobRun
	pod   *podRun
	group *groupRun
	tree  *treeRun
	prio  int32
	// created and seq order units of one priority (oldest first).
	created time.Duration
	seq     int
	queued  bool
	// tried: the unit did not fit when freed (and changed) had the
	// values recorded; it is tried again once a counter moved (a unit
	// that may preempt also when anything changed).
	tried                    bool
	triedFreed, triedChanged uint64
	// noticed counts the victims it chose that are under preemption
	// notice: it preempts nothing more meanwhile.
	noticed int
	// noticedVictims are those whose notice is over, evicted together
	// with the last.
	noticedVictims []preemption.Candidate
	// wakeAt: its preemption delay or short wait ends then (evWake).
	wakeAt time.Duration
	// waiting: its nomination holds what gangs that declared their end
	// free, instead of a preemption (a short wait).
	waiting bool
}

// unitQueue holds the queued units in the scheduler's order: priority
// (higher first), then creation.
type unitQueue struct{ items []*unitRun }

func before(a, b *unitRun) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.created != b.created {
		return a.created < b.created
	}
	return a.seq < b.seq
}

func (q *unitQueue) insert(u *unitRun) {
	i := sort.Search(len(q.items), func(i int) bool { return before(u, q.items[i]) })
	q.items = append(q.items, nil)
	copy(q.items[i+1:], q.items[i:])
	q.items[i] = u
	u.queued = true
}

// compact drops the units no longer queued.
func (q *unitQueue) compact() {
	out := q.items[:0]
	for _, u := range q.items {
		if u.queued {
			out = append(out, u)
		}
	}
	clear(q.items[len(out):])
	q.items = out
}

func (w *world) newUnit(key string, j *jobRun, pr *podRun, g *groupRun) *unitRun {
	w.seq++
	u := &unitRun{key: key, job: j, pod: pr, group: g, prio: j.spec.Priority, created: w.now, seq: w.seq}
	if pr != nil {
		u.prio = *pr.pod.Spec.Priority
	}
	w.units.insert(u)
	return u
}

// touch makes a unit active again (a member was added: the unit is tried
// at the next decisions), queueing it if it had left the queue.
func (u *unitRun) touch(w *world) {
	u.tried = false
	if !u.queued {
		w.units.insert(u)
	}
}

// pass is the scheduler deciding after the events of an instant: every
// queued unit that may fit now is decided, in queue order; a unit that
// does not fit waits until capacity is released (or, if it may preempt,
// until something changed). Passes repeat while decisions released
// capacity or made new units (preemption victims' replacements).
func (w *world) pass() {
	for round := 0; w.err == nil; round++ {
		freed, n := w.freed, w.seq
		items := append([]*unitRun(nil), w.units.items...)
		for i := 0; i < len(items) && w.err == nil; i++ {
			u := items[i]
			if !u.queued || !w.due(u, round) {
				continue
			}
			if run := w.podRun(items[i:], round); len(run) > 1 {
				w.attemptRun(run)
				i += len(run) - 1
				continue
			}
			w.attempt(u, true)
		}
		if w.err != nil {
			return
		}
		w.units.compact()
		if w.freed == freed && w.seq == n {
			return
		}
		if round > 10000 {
			w.err = fmt.Errorf("internal error: decisions at %s did not settle", w.now)
			return
		}
	}
}

// podRun is the lone pods of one job that come next in the queue, all due
// and none of which may preempt: deciding them as one basic unit places
// each as deciding them one after another would (placement fills the
// tightest node, then the next, as lone pods placed in turn land), in one
// pass over the nodes. Empty when items[0] is not such a pod.
func (w *world) podRun(items []*unitRun, round int) []*unitRun {
	first := items[0]
	if w.noBatch || first.pod == nil || w.mayPreempt(first) {
		return nil
	}
	n := 1
	for n < len(items) {
		u := items[n]
		if u.pod == nil || u.job != first.job || u.prio != first.prio || !u.queued || !w.due(u, round) {
			break
		}
		n++
	}
	return items[:n]
}

// attemptRun decides a run of lone pods as one basic unit, in queue
// order.
func (w *world) attemptRun(run []*unitRun) {
	pods := make([]*corev1.Pod, len(run))
	for i, u := range run {
		pods[i] = u.pod.pod
	}
	pu := &podgroup.Unit{Pods: pods, Members: pods, Pending: pods}
	snap := w.st.Snapshot(w.ctx, run[0].key, run[0].prio)
	if !w.noCheck && !w.mayFit(snap, run[0], pu, false) {
		w.rec.skipped++
		for _, u := range run {
			w.park(u)
		}
		return
	}
	d := decide.Decide(w.ctx, snap, w.st.CEL, decide.Input{Unit: podgroup.Single(pu), Priority: run[0].prio})
	w.rec.decisions++
	switch d.Kind {
	case decide.Bind:
		w.bind(d)
	case decide.Error:
		w.err = fmt.Errorf("%s: deciding %s at %s: %w", w.m.Name, run[0].key, w.now, d.Err)
		return
	default:
		w.rec.failed(d)
	}
	for _, u := range run {
		if u.pod.node != "" {
			u.queued = false
		} else {
			w.park(u)
		}
	}
}

func (w *world) due(u *unitRun, round int) bool {
	if !u.tried {
		return true
	}
	if u.triedFreed != w.freed {
		return true
	}
	return round == 0 && u.triedChanged != w.changed && w.mayPreempt(u)
}

func (w *world) park(u *unitRun) {
	u.tried, u.triedFreed, u.triedChanged = true, w.freed, w.changed
}

// resolve is the unit as the scheduler resolves it (podgroup.Resolve,
// ResolvePod, ResolveTree): a tree, of one leaf for a group or a pod.
func (w *world) resolve(u *unitRun) *podgroup.TreeUnit {
	switch {
	case u.tree != nil:
		var groups []*lockv1.PodGroup
		var pods []*corev1.Pod
		for _, g := range u.job.groups {
			groups, pods = append(groups, g.pg), append(pods, g.podList()...)
		}
		return podgroup.ResolveTree(u.tree.root, []*lockv1.CompositePodGroup{u.tree.root}, groups, pods, nil)
	case u.group != nil:
		pg := u.group.pg
		return podgroup.Single(podgroup.Resolve(pg, pg.Namespace, pg.Name, u.group.podList(), nil))
	}
	return podgroup.Single(podgroup.ResolvePod(u.pod.pod, nil))
}

// attempt decides one unit and carries the decision out. A preemption
// evicts its victims at once (they terminate in no virtual time) and the
// unit is decided again.
func (w *world) attempt(u *unitRun, again bool) {
	tu := w.resolve(u)
	if tu.Root.Pending() == 0 && tu.Waiting == "" {
		u.queued = false
		return
	}
	// Everything read from the cache is read before the cycle's snapshot:
	// the snapshot is the cache's, valid until the next update.
	preempt := w.mayPreempt(u)
	snap := w.st.Snapshot(w.ctx, u.key, u.prio)
	if f := tu.Flat(); f != nil && tu.Waiting == "" && !w.noCheck && !w.mayFit(snap, u, f, preempt) {
		w.rec.skipped++
		w.park(u)
		return
	}
	in := decide.Input{Unit: tu, Priority: u.prio}
	if preempt {
		in.Preemption = func() (*decide.Preemption, error) {
			if at, d := w.preemptionDelay(u); at > w.now {
				w.wake(u, at)
				return &decide.Preemption{Delayed: fmt.Sprintf("preemption delayed until %s (preemption delay %s)", at, d)}, nil
			}
			w.rec.searches++
			// As the scheduler: the groups' terms (minimum runtime,
			// notice, checkpoints) and its clock, so victims are chosen
			// by the work they lose.
			cands := preemption.TreeCandidates(w.st.Cache.Pods(), w.groupOf, w.compositeOf)
			preemption.Declare(cands, nil)
			return &decide.Preemption{Candidates: w.notUnderNotice(cands), Now: w.clk.Now(), ShortWait: w.shortWait}, nil
		}
	}
	d := decide.Decide(w.ctx, snap, w.st.CEL, in)
	w.rec.decisions++
	if u.waiting && !(d.Kind == decide.Preempt && d.Plan != nil && !d.Plan.WaitUntil.IsZero()) {
		// Its short wait is over: it binds, or it plans anew.
		u.waiting = false
		w.st.Cache.DropNomination(u.key)
	}
	switch d.Kind {
	case decide.Bind:
		w.bind(d)
		if complete(d) {
			u.queued = false
		} else {
			w.park(u)
		}
	case decide.Preempt:
		if d.Plan != nil && !d.Plan.WaitUntil.IsZero() {
			w.waitInstead(u, d.Plan)
			return
		}
		if d.Plan == nil || len(d.Plan.Victims) == 0 || !again {
			w.park(u)
			return
		}
		w.preempt(u, d)
		w.attempt(u, false)
	case decide.Error:
		w.err = fmt.Errorf("%s: deciding %s at %s: %w", w.m.Name, u.key, w.now, d.Err)
	default: // Unschedulable, Wait
		w.rec.failed(d)
		w.park(u)
	}
}

// complete reports whether a bound decision placed every pending member
// of every leaf.
func complete(d decide.Decision) bool {
	for _, n := range d.Leaves() {
		if !d.Leaf(n).Outcome.Complete() {
			return false
		}
	}
	return true
}

// groupOf resolves a PodGroup and its priority for preemption.Candidates.
func (w *world) groupOf(ns, name string) (*lockv1.PodGroup, int32) {
	g := w.groups[types.NamespacedName{Namespace: ns, Name: name}]
	if g == nil {
		return nil, 0
	}
	return g.pg, g.job.spec.Priority
}

// compositeOf is a job's root CompositePodGroup, for
// preemption.TreeCandidates (a victim tree is preempted whole).
func (w *world) compositeOf(ns, name string) *lockv1.CompositePodGroup {
	if t := w.trees[types.NamespacedName{Namespace: ns, Name: name}]; t != nil {
		return t.root
	}
	return nil
}

// mayPreempt reports whether a decision for u considers preemption: the
// model lets it (a model without DRA preemption only for units that need
// no DRA device), its pods' policy allows it, and something of lower
// priority runs.
func (w *world) mayPreempt(u *unitRun) bool {
	if u.noticed > 0 || !w.lowerRunning(u.prio) {
		return false
	}
	pods := w.unitPods(u)
	var pg *lockv1.PodGroup
	if u.group != nil {
		pg = u.group.pg
	}
	if preemption.Forbidden(pg, pods) != "" {
		return false
	}
	if w.m.preemptDRA {
		return true
	}
	for _, p := range pods {
		if w.needsDRA(p) {
			return false
		}
	}
	return true
}

func (w *world) unitPods(u *unitRun) []*corev1.Pod {
	switch {
	case u.tree != nil:
		var out []*corev1.Pod
		for _, g := range u.job.groups {
			out = append(out, g.podList()...)
		}
		return out
	case u.group != nil:
		return u.group.podList()
	}
	return []*corev1.Pod{u.pod.pod}
}

// lowerRunning reports whether a pod of priority below prio is bound.
func (w *world) lowerRunning(prio int32) bool {
	for p, n := range w.rec.boundByPrio {
		if n > 0 && p < prio {
			return true
		}
	}
	return false
}

// needsDRA reports whether a pod needs a DRA device: a claim, or an
// extended resource a DeviceClass serves.
func (w *world) needsDRA(p *corev1.Pod) bool {
	if len(p.Spec.ResourceClaims) > 0 {
		return true
	}
	var req snapshot.Resources
	if pr := w.pods[p.UID]; pr != nil && pr.pod == p {
		req = pr.req
	} else {
		req = snapshot.PodRequests(p, w.features)
	}
	for name := range req.Scalar {
		if w.draResource(name) {
			return true
		}
	}
	return false
}

// draResource reports whether a DeviceClass may serve an extended
// resource (its extendedResourceName, or the implicit
// deviceclass.resource.kubernetes.io/<class>).
func (w *world) draResource(name corev1.ResourceName) bool {
	return w.draNames[name] || strings.HasPrefix(string(name), resourcev1.ResourceDeviceClassPrefix)
}

// demand is what the smallest pending pod of a unit needs of one node, for
// the cheap capacity check.
type demand struct {
	devices       int64
	cpu, mem, pod int64
	scalar        map[corev1.ResourceName]int64
}

// mayFit is a necessary condition for the unit to fit, cheap next to
// Decide: enough nodes, counted by how many of its smallest pending pod
// each can hold (free devices, cpu, memory, pod slots, node-local extended
// resources; for a unit that may preempt, with what lower-priority pods
// hold counted as free), to place the members its minCount still needs.
// It never refuses a unit Decide would place; it lets through many that
// Decide then finds do not fit (taints, selectors, device attributes).
func (w *world) mayFit(snap *snapshot.Snapshot, u *unitRun, pu *podgroup.Unit, preempt bool) bool {
	need := 1
	if pu.Gang() {
		need = pu.MinCount() - pu.Bound
	}
	if need < 1 {
		need = 1
	}
	d := w.smallest(pu.Pending)
	if !preempt && d.devices > 0 && int64(need)*d.devices > int64(w.rec.freeDevices()) {
		// Not enough devices free in the whole cluster.
		w.rec.deviceShort(w.classesOf(pu.Pending))
		return false
	}
	if w.count(snap, d, need, u.prio, preempt) >= need {
		return true
	}
	if d.devices > 0 {
		// Short of devices, or of something else?
		other := d
		other.devices = 0
		if w.count(snap, other, need, u.prio, preempt) >= need {
			w.rec.deviceShort(w.classesOf(pu.Pending))
		}
	}
	return false
}

// count is how many pods of demand d the nodes can take, counting up to
// need.
func (w *world) count(snap *snapshot.Snapshot, d demand, need int, prio int32, preempt bool) int {
	count := 0
	for _, ni := range snap.Nodes {
		count += w.holds(ni, d, prio, preempt)
		if count >= need {
			break
		}
	}
	return count
}

// classesOf are the DeviceClasses pods' claim templates ask for.
func (w *world) classesOf(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName == nil {
				continue
			}
			t := w.wl.ClaimTemplates[types.NamespacedName{Namespace: p.Namespace, Name: *rc.ResourceClaimTemplateName}]
			for _, c := range dra.Classes(&t.Spec.Spec) {
				if !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// smallest is the least any one of pods asks of a node.
func (w *world) smallest(pods []*corev1.Pod) demand {
	var d demand
	for i, p := range pods {
		pr := w.pods[p.UID]
		if i == 0 || pr.demand.devices+pr.demand.cpu/1000 < d.devices+d.cpu/1000 {
			d = pr.demand
		}
	}
	if w.globalDevices {
		d.devices = 0
	}
	return d
}

// demandOf is what a pod asks of one node, for the capacity check.
func (w *world) demandOf(p *corev1.Pod) (demand, snapshot.Resources) {
	r := snapshot.PodRequests(p, w.features)
	d := demand{devices: w.deviceCount(p), cpu: r.MilliCPU, mem: r.Memory, pod: 1}
	for name, v := range r.Scalar {
		if !w.draResource(name) && v > 0 {
			if d.scalar == nil {
				d.scalar = map[corev1.ResourceName]int64{}
			}
			d.scalar[name] = v
		}
	}
	return d, r
}

// deviceCount is how many devices a pod's claims from templates ask for
// (exact counts; the fewest of a request's alternatives).
func (w *world) deviceCount(p *corev1.Pod) int64 {
	var n int64
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimTemplateName == nil {
			continue
		}
		t := w.wl.ClaimTemplates[types.NamespacedName{Namespace: p.Namespace, Name: *rc.ResourceClaimTemplateName}]
		if t == nil {
			continue
		}
		n += dra.LeastDevices(&t.Spec.Spec)
	}
	return n
}

// holds is how many pods of demand d node ni can take now (for a
// preemptor of priority prio, also taking what lower-priority pods hold).
func (w *world) holds(ni *snapshot.NodeInfo, d demand, prio int32, preempt bool) int {
	free, used := &ni.Allocatable, &ni.Requested
	freeDev := int64(ni.FreeDevices())
	cpu, mem, pods := free.MilliCPU-used.MilliCPU, free.Memory-used.Memory, free.Pods-used.Pods
	var lower []*podRun
	if preempt {
		for _, pr := range w.onNode[ni.Node.Name] {
			if *pr.pod.Spec.Priority < prio {
				lower = append(lower, pr)
				freeDev += int64(pr.devices)
				cpu, mem, pods = cpu+pr.req.MilliCPU, mem+pr.req.Memory, pods+1
			}
		}
	}
	n := int64(1 << 30)
	n = fitIn(n, freeDev, d.devices)
	n = fitIn(n, cpu, d.cpu)
	n = fitIn(n, mem, d.mem)
	n = fitIn(n, pods, d.pod)
	for name, v := range d.scalar {
		have := free.Scalar[name] - used.Scalar[name]
		for _, pr := range lower {
			have += pr.req.Scalar[name]
		}
		n = fitIn(n, have, v)
	}
	return int(max(n, 0))
}

// fitIn lowers n to how many asks of want fit in have (want 0: no bound).
func fitIn(n, have, want int64) int64 {
	if want <= 0 {
		return n
	}
	return min(n, have/want)
}

// notUnderNotice leaves out candidates already given notice by another
// preemptor: what they free is held for it (the scheduler's nomination).
func (w *world) notUnderNotice(cs []preemption.Candidate) []preemption.Candidate {
	out := cs[:0]
	for _, c := range cs {
		if j := w.jobOf(c); j != nil && j.noticeUntil > w.now {
			continue
		}
		out = append(out, c)
	}
	return out
}

// waitInstead carries out a short wait (preemption.Plan.WaitUntil): as the
// scheduler, it evicts nothing and nominates the unit for what the gangs
// that declared their end free — no unit of its priority or lower takes
// it — until NominationSlack past that end; then it plans again.
func (w *world) waitInstead(u *unitRun, plan *preemption.Plan) {
	nom := plan.Nomination(u.prio, w.clk.Now())
	w.st.Cache.Nominate(u.key, nom)
	if !u.waiting {
		w.rec.shortWaits++
	}
	u.waiting = true
	w.wake(u, nom.Deadline.Sub(Epoch))
	w.park(u)
}

// wake decides u again at at (its preemption delay or short wait ends).
func (w *world) wake(u *unitRun, at time.Duration) {
	if u.wakeAt == at {
		return
	}
	u.wakeAt = at
	w.push(event{at: at, kind: evWake, preemptor: u})
}

// preemptionDelay is when u may first preempt, and its delay, as the
// scheduler reads it: its tree root's or PodGroup's
// lockv1.PreemptionDelayAnnotation, else Options.PreemptionDelay for its
// pods' PriorityClass, from when its newest pending member was created.
func (w *world) preemptionDelay(u *unitRun) (time.Duration, time.Duration) {
	var ann map[string]string
	switch {
	case u.tree != nil:
		ann = u.tree.root.Annotations
	case u.group != nil:
		ann = u.group.pg.Annotations
	}
	var newest *corev1.Pod
	for _, p := range w.unitPods(u) {
		if pr := w.pods[p.UID]; pr != nil && pr.node == "" && (newest == nil || p.CreationTimestamp.After(newest.CreationTimestamp.Time)) {
			newest = p
		}
	}
	if newest == nil {
		return 0, 0
	}
	d := podgroup.PreemptionDelayOf(ann, newest.Spec.PriorityClassName, w.delay)
	if d <= 0 {
		return 0, 0
	}
	return newest.CreationTimestamp.Sub(Epoch) + d, d
}
