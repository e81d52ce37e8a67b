package scheduler

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// unit is a queue key resolved against the caches (podgroup.Resolve).
type unit struct {
	key queue.Key
	*podgroup.Unit
}

// records reports whether the unit's group keeps incarnations (Lockstep's
// PodGroups; the in-tree API has no such status).
func (u *unit) records() bool { return u.Group != nil && !podgroup.Upstream(u.Group) }

// scheduleOne runs one cycle for a unit and reports the outcome to the queue.
func (s *Scheduler) scheduleOne(ctx context.Context, k queue.Key) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "unit", k)
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	u, err := s.resolveUnit(k)
	if err != nil {
		logger.Error(err, "Resolving unit")
		s.queue.Retry(k)
		return
	}
	if u == nil || len(u.Pending) == 0 {
		if u != nil && u.records() && podgroup.Unrecorded(u.Group.Status.Incarnation, u.Pods) > 0 {
			// Bound members nobody recorded: a crash between binding and
			// recording, or a group bound before incarnations existed.
			s.recordIncarnation(ctx, u, nil)
		}
		s.noms.drop(k)
		s.queue.Done(k)
		return
	}
	prio := s.priority(k)
	snap := s.snapshot(k, prio)
	d := decide.Decide(ctx, snap, s.celCache, decide.Input{Unit: u.Unit, Priority: prio, Preemption: func() (*decide.Preemption, error) {
		return s.preemptionInput(ctx, u)
	}})
	logger.V(1).Info("Decided", "decision", d.Kind, "pending", len(u.Pending), "bound", u.Bound, "placed", len(d.Result.Assignments), "placeable", d.Result.Placeable, "took", time.Since(start))
	s.execute(ctx, u, d, start, prio)
}

// execute carries a decision out: its API writes and exactly one queue
// transition for the unit.
func (s *Scheduler) execute(ctx context.Context, u *unit, d decide.Decision, start time.Time, prio int32) {
	logger := klog.FromContext(ctx)
	k := u.key
	switch d.Kind {
	case decide.Wait:
		logger.V(2).Info("Unit waits", "reason", d.Reason)
		u.Waiting, u.WaitReason = d.Reason, d.WaitReason
		s.reportWaiting(ctx, u)
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
		s.noms.drop(k)
		s.goBind(ctx, func(ctx context.Context) { s.bindUnit(ctx, u, d, start) })
	default: // Unschedulable, Preempt
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

func (s *Scheduler) priority(k queue.Key) int32 {
	p, _ := s.order(k)
	return p
}

// victimPoll bounds how long a preemptor waits for an event before it
// checks on its victims again.
const victimPoll = 5 * time.Second

func (s *Scheduler) observe(start time.Time, result string) {
	s.metrics.Attempts.WithLabelValues(result).Inc()
	s.metrics.AttemptDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
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
	kind, ns, name, err := parseKey(k)
	if err != nil {
		return nil, err
	}
	if kind+"/" == podKeyPrefix {
		p, err := s.listers.pods.Pods(ns).Get(name)
		if err != nil {
			return nil, ignoreNotFound(err)
		}
		if !podgroup.Ours(p) || podgroup.GroupOf(p) != "" {
			// A pod that joined a group since it was queued (Kueue labels a
			// StatefulSet's pods with their group after creating them) is
			// placed with its group, never alone.
			return nil, nil
		}
		return &unit{key: k, Unit: podgroup.ResolvePod(p, s.isAssumed)}, nil
	}
	objs, err := s.listers.podIndex.ByIndex(groupIndex, ns+"/"+name)
	if err != nil {
		return nil, err
	}
	pg, err := s.podGroup(ns, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		pods = append(pods, o.(*corev1.Pod))
	}
	return &unit{key: k, Unit: podgroup.Resolve(pg, ns, name, pods, s.isAssumed)}, nil
}

func (s *Scheduler) isAssumed(p *corev1.Pod) bool {
	_, ok := s.cache.AssumedNode(p.UID)
	return ok
}

// snapshot brings the cache's snapshot up to date for a cycle — assumed
// decisions applied, only what changed since the last cycle copied — with
// the capacity nominated to other preemptors of priority ≥ prio held.
func (s *Scheduler) snapshot(self queue.Key, prio int32) *snapshot.Snapshot {
	snap := s.cache.Update()
	snap.Constraints = s.filters.NewLazyView(snap.NodeObjects, s.cache.Pods, s.cache.AntiAffinityPods())
	s.noms.reserve(snap, self, prio)
	return snap
}
