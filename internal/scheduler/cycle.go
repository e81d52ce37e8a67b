package scheduler

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// unit is a queue key resolved against the caches: the tree it places
// (podgroup.ResolveTree; a flat PodGroup or a lone pod is a tree of one
// leaf, podgroup.Single) and, for a tree of CompositePodGroups, its root.
type unit struct {
	key  queue.Key
	tree *podgroup.TreeUnit
	root *lockv1.CompositePodGroup
	// protectionEnds is when the first lower-priority candidate its
	// preemption search had to spare (minimum runtime) becomes a victim
	// (zero: none was spared); the unit is tried again then.
	protectionEnds time.Time
	// noticeEnds is when the first notice its victims were given ends,
	// while they are all it waits for (zero otherwise).
	noticeEnds time.Time
	// preemptAt is when its preemption delay ends, while it has not
	// (zero otherwise): it is tried again then.
	preemptAt time.Time
	// capacityGen is the queue's capacity generation when the unit was
	// read: what its cycle saw of the nodes (beyond.go).
	capacityGen uint64
}

// group is one leaf of a unit as its reports see it: a PodGroup's (or a
// lone pod's) members, under the unit's key.
type group struct {
	key queue.Key
	*podgroup.Unit
}

// leaves are the unit's groups, in tree order.
func (u *unit) leaves() []*group {
	var out []*group
	for _, l := range u.tree.Root.Leaves() {
		out = append(out, &group{key: u.key, Unit: l})
	}
	return out
}

// idle reports whether the unit has nothing to place and nothing to say:
// no member pending, and no wait to report — a flat group (or pod) waits
// silently until it has members to place or gated ones (a group with no
// pods yet is not written), a tree says on its root why it waits.
func (u *unit) idle() bool {
	if f := u.tree.Flat(); f != nil {
		return len(f.Pending) == 0 && f.Gated == 0
	}
	return u.tree.Waiting == "" && u.tree.Root.Pending() == 0
}

// records reports whether the group keeps incarnations (Lockstep's
// PodGroups; the in-tree API has no such status).
func (g *group) records() bool { return g.Group != nil && !podgroup.Upstream(g.Group) }

// scheduleOne runs one cycle for a unit — a flat group, a lone pod or a
// scheduling tree, all by the same path — and reports the outcome to the
// queue.
func (s *Scheduler) scheduleOne(ctx context.Context, it queue.Item) {
	switch it.Key.Kind {
	case queue.Workload:
		s.checkWorkload(ctx, it)
		return
	case queue.Check:
		s.activateCheck(ctx, it.Key)
		return
	}
	k := it.Key
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "unit", k)
	ctx = klog.NewContext(ctx, logger)
	start := s.clock.Now()
	capacityGen := s.queue.CapacityGeneration()
	u, err := s.resolve(k)
	if err != nil {
		logger.Error(err, "Resolving unit")
		s.queue.Retry(k)
		return
	}
	if u == nil {
		s.dropNomination(ctx, k)
		delete(s.beyond, k)
		s.queue.Done(k)
		return
	}
	u.capacityGen = capacityGen
	for _, g := range u.leaves() {
		if g.records() && len(g.Pending) == 0 && podgroup.Unrecorded(g.Group.Status.Incarnation, g.Pods) > 0 {
			// Bound members nobody recorded: a crash between binding and
			// recording, or a group bound before incarnations existed.
			s.recordIncarnation(ctx, g, nil)
		}
	}
	if u.tree.Root.Pending() == 0 {
		s.reportBound(ctx, u)
	}
	if u.idle() {
		s.dropNomination(ctx, k)
		delete(s.beyond, k)
		s.queue.Done(k)
		return
	}
	if s.skipBeyond(u) {
		logger.V(2).Info("Unit still beyond capacity: neither it nor the nodes changed; not decided again")
		return
	}
	nc := s.checkNomination(k) // before the snapshot: see checkNomination
	decideStart := s.clock.Now()
	snap := s.state.Snapshot(ctx, k.String(), it.Priority)
	d := decide.Decide(ctx, snap, s.state.CEL, decide.Input{Unit: u.tree, Priority: it.Priority, Preemption: func() (*decide.Preemption, error) {
		p, err := s.preemptionInput(ctx, u, it.Priority, nc)
		if p != nil {
			u.protectionEnds = preemption.ProtectionEnds(p.Candidates, it.Priority, p.Now)
		}
		return p, err
	}})
	s.metrics.AlgorithmDuration.Observe(s.clock.Since(decideStart).Seconds())
	logger.V(1).Info("Decided", "decision", d.Kind, "pending", u.tree.Root.Pending(), "placed", len(d.Assignments()), "took", s.clock.Since(start))
	s.execute(ctx, u, d, start, it.Priority)
}

// execute carries a decision out: its API writes and exactly one queue
// transition for the unit.
func (s *Scheduler) execute(ctx context.Context, u *unit, d decide.Decision, start time.Time, prio int32) {
	logger := klog.FromContext(ctx)
	k := u.key
	switch d.Kind {
	case decide.Wait:
		logger.V(2).Info("Unit waits", "reason", d.Reason)
		s.arriving.Store(s.clock.Now().Add(arrivalLinger).UnixNano())
		s.reportWaiting(ctx, u, d)
		// Pod, claim and PodGroup events bring the unit back, a dear
		// one at a bounded pace.
		s.queue.WaitPaced(k, waitGap(s.clock.Since(start)))
	case decide.Error:
		s.observe(u, start, metrics.ResultError)
		s.reportError(ctx, u, d.Err)
		if d.MissingClaim() {
			s.queue.Wait(k)
		} else {
			s.queue.Retry(k)
		}
	case decide.Bind:
		// The binding cycle: the writes run while the next units are
		// decided; the unit stays in flight until they are done. The
		// placement is assumed first, so those cycles see it taken.
		s.binder.assume(d.Assignments())
		s.dropNomination(ctx, k)
		s.goBind(ctx, func(ctx context.Context) { s.bind(ctx, u, d, start) })
	default: // Unschedulable, Preempt
		if d.DropNomination {
			s.dropNomination(ctx, k)
		}
		note, victimsGoing := s.preempt(ctx, u, prio, d)
		if d.Kind == decide.Unschedulable && (u.protectionEnds.After(s.clock.Now()) || u.preemptAt.After(s.clock.Now())) {
			// Spared victims (minimum runtime): the condition says whom,
			// until when.
			note = joinNote(note, d.Reason)
		}
		if d.Kind == decide.Unschedulable && !victimsGoing {
			// No node fits it and no preemption makes room: a gang's
			// missing nodes are asked of Karpenter (--karpenter), and its
			// pods say so instead of Unschedulable.
			if out, ok := s.provision(ctx, u, prio); ok {
				if out.reason == PodReasonNoCapacity {
					out.message = joinNote(out.message, s.shortfall(ctx, u, prio))
				}
				s.reportProvisioning(ctx, u, d, out)
				s.observe(u, start, metrics.ResultUnschedulable)
				if out.reason == PodReasonWaitingForNodes {
					s.queue.WaitFor(k, provisionPoll)
				} else {
					// Planning is dear (a decision per count tried): a
					// unit no offering helps waits for the cluster or a
					// NodePool to change.
					s.queue.Unschedulable(k)
				}
				return
			}
			// No autoscaler Lockstep drives: the gang's condition says
			// how many more nodes of which group it needs.
			note = joinNote(note, s.shortfall(ctx, u, prio))
		}
		beyond := ""
		if d.Kind == decide.Unschedulable && !victimsGoing {
			beyond = s.beyondCapacity(u)
			if beyond != "" && u.multiMember() {
				note = joinNote(note, beyond+"; it is tried again when nodes change")
			}
		}
		s.reportUnplaced(ctx, u, d, note)
		s.observe(u, start, metrics.ResultUnschedulable)
		s.countDeviceFailures(d)
		switch now := s.clock.Now(); {
		case victimsGoing && u.noticeEnds.After(now):
			// Only victims under notice: their acknowledgements wake it.
			s.queue.WaitFor(k, min(u.noticeEnds.Sub(now), noticePoll))
		case victimsGoing:
			// Pod and claim events announce the victims' departure.
			s.queue.WaitFor(k, victimPoll)
		case u.protectionEnds.After(now):
			// No event says a minimum runtime ended.
			s.queue.WaitFor(k, u.protectionEnds.Sub(now))
		case u.preemptAt.After(now):
			// Nor that a preemption delay did.
			s.queue.WaitFor(k, u.preemptAt.Sub(now))
		case beyond != "":
			// Pods ending cannot help it: it is not decided again at
			// each neighbour's departure (a 10,000-rank gang's decision
			// holds the loop for a neighbour's whole cycle).
			s.parkBeyond(u)
		default:
			s.queue.Unschedulable(k)
		}
	}
}

// protected are the pods of a decision to bind with Karpenter's
// do-not-disrupt (--karpenter): the members of a unit of more than one
// member that loses them all when it loses one — its groups disrupted
// whole (disruptionMode all, the default). A group that replaces members
// one by one (single), and a lone pod, lose only what a drain takes, so
// Karpenter may drain their nodes as usual.
func (s *Scheduler) protected(d decide.Decision) map[types.UID]bool {
	if !s.opts.Karpenter {
		return nil
	}
	leaves := d.Leaves()
	members := 0
	for _, n := range leaves {
		members += len(d.Nodes[n].Unit.Members)
	}
	if members < 2 {
		return nil
	}
	out := map[types.UID]bool{}
	for _, n := range leaves {
		if !podgroup.DisruptAll(d.Nodes[n].Unit.Group) {
			continue
		}
		for _, a := range d.Tree.Leaves[n].Assignments {
			out[a.Pod.UID] = true
		}
	}
	return out
}

// bind is a unit's binding cycle: the bindings, each group's incarnation
// and status, each composite's condition, events, and the queue
// transition.
func (s *Scheduler) bind(ctx context.Context, u *unit, d decide.Decision, start time.Time) {
	logger := klog.FromContext(ctx)
	k := u.key
	bound, err := s.binder.bind(ctx, d.Assignments(), s.protected(d))
	boundUIDs := make(map[types.UID]bool, len(bound))
	for _, p := range bound {
		boundUIDs[p.UID] = true
	}
	leaves := d.Leaves()
	for _, n := range leaves {
		g := &group{key: k, Unit: d.Nodes[n].Unit}
		var mine []*corev1.Pod
		for _, a := range d.Tree.Leaves[n].Assignments {
			if boundUIDs[a.Pod.UID] {
				mine = append(mine, a.Pod)
			}
		}
		if len(mine) > 0 && g.records() {
			// Record what is bound even when part failed: the next cycle
			// binds the rest into the same incarnation, and if it cannot,
			// the integrity controller sees a gang short of minCount.
			s.recordIncarnation(ctx, g, mine)
		}
	}
	if err != nil {
		s.observe(u, start, metrics.ResultError)
		s.metrics.WriteErrors.WithLabelValues(writeKind(err)).Inc()
		logger.Error(err, "Binding failed; unit requeued")
		s.reportError(ctx, u, err)
		s.queue.Retry(k)
		return
	}
	complete := true
	for _, n := range leaves {
		g, ld := &group{key: k, Unit: d.Nodes[n].Unit}, d.Leaf(n)
		if ld.Outcome.Admitted {
			s.groupPlaced(ctx, g, ld, "")
		}
		if !ld.Outcome.Complete() && len(g.Pending) > 0 {
			complete = false
		}
	}
	s.reportComposites(ctx, u, d, len(bound))
	s.finishProvisioning(ctx, u)
	s.observe(u, start, metrics.ResultScheduled)
	if complete {
		s.queue.Done(k)
	} else {
		s.countDeviceFailures(d)
		s.queue.Unschedulable(k)
	}
}

// maxBindingUnits bounds the units whose writes are in flight at once; a
// cycle that places another waits for a slot (back-pressure on the API
// server rather than an unbounded backlog of writes).
const maxBindingUnits = 8

// goBind runs a unit's binding cycle in the background.
func (s *Scheduler) goBind(ctx context.Context, f func(context.Context)) {
	s.bindSlots <- struct{}{}
	s.bindings.Add(1)
	go func() {
		defer func() {
			<-s.bindSlots
			s.bindings.Done()
		}()
		f(ctx)
	}()
}

// A unit that waits is brought back by the event it waits for. For a small
// gang that cycle is cheap; for one of thousands of members it is not (it
// reads every member that exists), and its members arrive one at a time,
// each an event. After a waiting cycle of d, its events bring it back
// waitGapFactor·d later at the soonest (at most maxWaitGap), so it takes at
// most a quarter of the loop while its members arrive, and its last member
// is seen that much later. A cycle under cheapCycle is not paced.
const (
	waitGapFactor = 3
	cheapCycle    = 5 * time.Millisecond
	maxWaitGap    = time.Second
)

// waitGap is how long after a waiting cycle of d its unit's events bring
// it back at the soonest.
func waitGap(d time.Duration) time.Duration {
	if d < cheapCycle {
		return 0
	}
	return min(waitGapFactor*d, maxWaitGap)
}

// arrivalLinger is how long after a unit was decided to wait for its own
// members or claims the scheduler takes them to be arriving: a gang's pods
// are created one after the other, its claims by the
// kube-controller-manager after them, and each is a cycle away from its
// binding.
const arrivalLinger = time.Second

// foreground reports whether the scheduler has work someone waits on: units
// ready to be decided, a unit's members or claims arriving (decided to wait
// for them within arrivalLinger), bindings in flight. The writes nobody
// waits on — pending pods' conditions and events — give way to it
// (pace.go, eventsink.go).
func (s *Scheduler) foreground() bool {
	active, _ := s.queue.Len()
	return active > 0 || len(s.bindSlots) > 0 || s.clock.Now().UnixNano() < s.arriving.Load()
}

// eventsGiveWay reports whether a backlog of events gives way
// (eventsink.go): to the foreground, and to a backlog of pods' conditions
// not yet written. A condition is what tools and autoscalers read
// (Karpenter provisions for a pod that shows
// PodScheduled=False/Unschedulable); an event is a log for people, and for
// a gang of thousands the broadcaster keeps only the first thousand anyway.
func (s *Scheduler) eventsGiveWay() bool {
	return s.foreground() || s.podStatus.pending() > giveWayBacklog
}

// victimPoll bounds how long a preemptor waits for an event before it
// checks on its victims again.
const victimPoll = 5 * time.Second

// observe records a unit's attempt (a tree's also as a tree's).
func (s *Scheduler) observe(u *unit, start time.Time, result string) {
	s.metrics.Attempts.WithLabelValues(result).Inc()
	s.metrics.AttemptDuration.WithLabelValues(result).Observe(s.clock.Since(start).Seconds())
	if u.root != nil {
		s.metrics.TreeAttempts.WithLabelValues(result).Inc()
	}
}

// countDeviceFailures counts, once per class, units that failed on
// devices (in any of their leaves).
func (s *Scheduler) countDeviceFailures(d decide.Decision) {
	classes := map[string]bool{}
	for _, n := range d.Leaves() {
		for _, f := range d.Leaf(n).Outcome.Waiting {
			if f.Diagnosis.Reasons[placement.ReasonDevices] > 0 {
				for _, c := range f.Diagnosis.DeviceClasses {
					classes[c] = true
				}
			}
		}
	}
	for c := range classes {
		s.metrics.DeviceAllocationFailures.WithLabelValues(c).Inc()
	}
}

// writeKind says which phase a binder error came from.
func writeKind(err error) string {
	switch {
	case errors.Is(err, errBindingConditions):
		return "binding_conditions"
	case errors.Is(err, errVolumeBind):
		return "volume"
	case errors.Is(err, errClaimWrite):
		return "claim"
	}
	return "binding"
}

// resolve reads the unit k names from the caches — a lone pod, a flat
// PodGroup, or the tree rooted at a CompositePodGroup; nil means nothing
// to do (gone, or placed with another unit).
func (s *Scheduler) resolve(k queue.Key) (*unit, error) {
	switch k.Kind {
	case queue.Tree:
		return s.resolveTree(k)
	case queue.Pod:
		p, err := s.listers.pods.Pods(k.Namespace).Get(k.Name)
		if err != nil {
			return nil, ignoreNotFound(err)
		}
		if !podgroup.Ours(p) || podgroup.GroupOf(p) != "" {
			// A pod that joined a group since it was queued (Kueue labels a
			// StatefulSet's pods with their group after creating them) is
			// placed with its group, never alone.
			return nil, nil
		}
		return &unit{key: k, tree: podgroup.Single(podgroup.ResolvePod(p, s.assumedNodes(), s.kueueWords()))}, nil
	}
	pods, err := s.groupPods(k.Namespace, k.Name)
	if err != nil {
		return nil, err
	}
	pg, err := s.podGroup(k.Namespace, k.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	g := podgroup.Resolve(pg, k.Namespace, k.Name, pods, s.assumedNodes(), s.kueueWords())
	if parent := podgroup.ParentOf(pg); parent != "" {
		// A group of a tree is placed with its tree, never alone; while
		// its tree has no root, it waits, saying why.
		root, reason, why := podgroup.RootOf(parent, s.compositeGetter(k.Namespace))
		if root != nil {
			s.queue.Add(queue.TreeKey(k.Namespace, root.Name))
			return nil, nil
		}
		g.Waiting, g.WaitReason = why, reason
	}
	return &unit{key: k, tree: podgroup.Single(g)}, nil
}

// groupPods are the pods that name group ns/name, from the pod cache.
func (s *Scheduler) groupPods(ns, name string) ([]*corev1.Pod, error) {
	objs, err := s.listers.podIndex.ByIndex(groupIndex, ns+"/"+name)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		pods = append(pods, o.(*corev1.Pod))
	}
	return pods, nil
}

// assumedNodes looks up the node the scheduler placed a pod on while
// binding it, in the assumptions as they are now (read once: a unit's
// members are many).
func (s *Scheduler) assumedNodes() podgroup.Assumed {
	m := s.state.Cache.AssumedNodes()
	if m == nil {
		return nil
	}
	return func(p *corev1.Pod) (string, bool) {
		node, ok := m[p.UID]
		return node, ok
	}
}
