package scheduler

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// unit is a queue key resolved against the caches (podgroup.Resolve); for
// a tree (podgroup.ResolveTree), tree and its root are set and Unit is
// empty.
type unit struct {
	key queue.Key
	*podgroup.Unit
	tree *podgroup.TreeUnit
	root *lockv1.CompositePodGroup
}

// records reports whether the unit's group keeps incarnations (Lockstep's
// PodGroups; the in-tree API has no such status).
func (u *unit) records() bool { return u.Group != nil && !podgroup.Upstream(u.Group) }

// scheduleOne runs one cycle for a unit and reports the outcome to the queue.
func (s *Scheduler) scheduleOne(ctx context.Context, it queue.Item) {
	if it.Key.Kind == queue.Tree {
		s.scheduleTree(ctx, it)
		return
	}
	k := it.Key
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "unit", k)
	ctx = klog.NewContext(ctx, logger)
	start := s.clock.Now()
	u, err := s.resolveUnit(k)
	if err != nil {
		logger.Error(err, "Resolving unit")
		s.queue.Retry(k)
		return
	}
	if u != nil && len(u.Pending) == 0 && u.records() && podgroup.Unrecorded(u.Group.Status.Incarnation, u.Pods) > 0 {
		// Bound members nobody recorded: a crash between binding and
		// recording, or a group bound before incarnations existed.
		s.recordIncarnation(ctx, u, nil)
	}
	if u != nil && len(u.Pending) == 0 {
		s.reportBound(ctx, u)
	}
	// Nothing to place: done — unless members wait for their gates, which
	// the group's condition says (a group with no pods yet is not written).
	if u == nil || len(u.Pending) == 0 && u.Gated == 0 {
		s.state.Cache.DropNomination(k.String())
		s.queue.Done(k)
		return
	}
	nc := s.checkNomination(k) // before the snapshot: see checkNomination
	decideStart := s.clock.Now()
	snap := s.state.Snapshot(ctx, k.String(), it.Priority)
	d := decide.Decide(ctx, snap, s.state.CEL, decide.Input{Unit: u.Unit, Priority: it.Priority, Preemption: func() (*decide.Preemption, error) {
		return s.preemptionInput(ctx, u, nc)
	}})
	s.metrics.AlgorithmDuration.Observe(s.clock.Since(decideStart).Seconds())
	logger.V(1).Info("Decided", "decision", d.Kind, "pending", len(u.Pending), "bound", u.Bound, "placed", len(d.Result.Assignments), "placeable", d.Result.Placeable, "took", s.clock.Since(start))
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
		s.reportWaiting(ctx, u, d.Reason, d.WaitReason)
		// Pod, claim and PodGroup events bring the unit back.
		s.queue.Wait(k)
	case decide.Error:
		s.observe(start, metrics.ResultError)
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
		s.binder.assume(d.Result.Assignments)
		s.state.Cache.DropNomination(k.String())
		s.goBind(ctx, func(ctx context.Context) { s.bindUnit(ctx, u, d, start) })
	default: // Unschedulable, Preempt
		if d.DropNomination {
			s.state.Cache.DropNomination(k.String())
		}
		note, victimsGoing := s.preempt(ctx, u, prio, d)
		s.reportPlaced(ctx, u, d, note)
		s.observe(start, metrics.ResultUnschedulable)
		s.countDeviceFailures(d.Outcome)
		if victimsGoing {
			// Pod and claim events announce the victims' departure.
			s.queue.WaitFor(k, victimPoll)
		} else {
			s.queue.Unschedulable(k)
		}
	}
}

// bindUnit is a unit's binding cycle: the bindings, the incarnation, the
// statuses and events, and the queue transition.
func (s *Scheduler) bindUnit(ctx context.Context, u *unit, d decide.Decision, start time.Time) {
	logger := klog.FromContext(ctx)
	k := u.key
	bound, err := s.binder.bind(ctx, d.Result.Assignments)
	if len(bound) > 0 && u.records() {
		// Record what is bound even when part failed: the next cycle
		// binds the rest into the same incarnation, and if it cannot,
		// the integrity controller sees a gang short of minCount.
		s.recordIncarnation(ctx, u, bound)
	}
	if err != nil {
		s.observe(start, metrics.ResultError)
		s.metrics.WriteErrors.WithLabelValues(writeKind(err)).Inc()
		logger.Error(err, "Binding failed; unit requeued")
		s.reportError(ctx, u, err)
		s.queue.Retry(k)
		return
	}
	s.reportPlaced(ctx, u, d, "")
	s.observe(start, metrics.ResultScheduled)
	if !d.Outcome.Complete() {
		s.countDeviceFailures(d.Outcome)
		s.queue.Unschedulable(k)
	} else {
		s.queue.Done(k)
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

// victimPoll bounds how long a preemptor waits for an event before it
// checks on its victims again.
const victimPoll = 5 * time.Second

func (s *Scheduler) observe(start time.Time, result string) {
	s.metrics.Attempts.WithLabelValues(result).Inc()
	s.metrics.AttemptDuration.WithLabelValues(result).Observe(s.clock.Since(start).Seconds())
}

// observeTree records a tree's attempt, as a unit's and as a tree's.
func (s *Scheduler) observeTree(start time.Time, result string) {
	s.observe(start, result)
	s.metrics.TreeAttempts.WithLabelValues(result).Inc()
}

// countDeviceFailures counts, once per class, units that failed on devices.
func (s *Scheduler) countDeviceFailures(o placement.Outcome) {
	classes := map[string]bool{}
	for _, f := range o.Waiting {
		if f.Diagnosis.Reasons[placement.ReasonDevices] > 0 {
			for _, c := range f.Diagnosis.DeviceClasses {
				classes[c] = true
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

// resolveUnit reads a unit from the caches; nil means nothing to do.
func (s *Scheduler) resolveUnit(k queue.Key) (*unit, error) {
	if k.Kind == queue.Pod {
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
		return &unit{key: k, Unit: podgroup.ResolvePod(p, s.assumedNode)}, nil
	}
	pods, err := s.groupPods(k.Namespace, k.Name)
	if err != nil {
		return nil, err
	}
	pg, err := s.podGroup(k.Namespace, k.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	u := &unit{key: k, Unit: podgroup.Resolve(pg, k.Namespace, k.Name, pods, s.assumedNode)}
	if parent := podgroup.ParentOf(pg); parent != "" {
		// A group of a tree is placed with its tree, never alone; while
		// its tree has no root, it waits, saying why.
		root, reason, why := podgroup.RootOf(parent, s.compositeGetter(k.Namespace))
		if root != nil {
			s.queue.Add(queue.TreeKey(k.Namespace, root.Name))
			return nil, nil
		}
		u.Waiting, u.WaitReason = why, reason
	}
	return u, nil
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

// assumedNode is the node the scheduler placed p on while binding it.
func (s *Scheduler) assumedNode(p *corev1.Pod) (string, bool) {
	return s.state.Cache.AssumedNode(p.UID)
}

func (s *Scheduler) assumed(p *corev1.Pod) bool {
	_, ok := s.state.Cache.AssumedNode(p.UID)
	return ok
}
