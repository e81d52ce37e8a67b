package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/dra"
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
	if u.Waiting != "" {
		logger.V(2).Info("Unit waits", "reason", u.Waiting)
		s.reportWaiting(ctx, u)
		// Pod, claim and PodGroup events bring the unit back.
		s.queue.Wait(k)
		return
	}
	members, missing := s.members(u)
	if missing != "" {
		logger.V(2).Info("Unit waits", "reason", missing)
		u.Waiting = missing
		s.reportWaiting(ctx, u)
		s.queue.Wait(k)
		return
	}
	prio := s.priority(k)
	snap := s.snapshot(k, prio)
	pu := placement.Unit{Members: members, Bound: u.Bound, MinCount: u.MinCount(), Gang: u.Gang(), TopologyKeys: podgroup.TopologyKeys(u.Group)}
	res, err := placement.Place(ctx, snap, dra.New(snap, s.celCache), pu)
	logger.V(1).Info("Placement decided", "pending", len(u.Pending), "bound", u.Bound, "placed", len(res.Assignments), "placeable", res.Placeable, "took", time.Since(start))
	if err != nil {
		s.observe(start, metrics.ResultError)
		s.reportError(ctx, u, err)
		if errors.Is(err, placement.ErrMissingClaim) {
			s.queue.Wait(k)
		} else {
			s.queue.Retry(k)
		}
		return
	}
	unschedulable := len(res.Unplaced) > 0 && (u.Gang() || len(res.Assignments) == 0)
	summary := ""
	if len(res.Unplaced) > 0 {
		// Read from the snapshot now: the next cycle changes it.
		summary = placement.Summary(ctx, snap, s.celCache, pu, res)
	}
	if len(res.Assignments) > 0 {
		s.binder.assume(res.Assignments)
		if !unschedulable {
			// The binding cycle: the writes run while the next units are
			// decided; the unit stays in flight until they are done.
			s.noms.drop(k)
			s.goBind(ctx, func(ctx context.Context) { s.complete(ctx, u, pu, nil, res, summary, start, prio) })
			return
		}
	}
	if !unschedulable {
		snap = nil
	}
	s.complete(ctx, u, pu, snap, res, summary, start, prio)
}

// complete writes a cycle's outcome: the bindings, the incarnation, the
// statuses and events, a preemption for a unit that does not fit, and the
// queue transition. snap is set for a unit that did not fit (preemption
// decides from it), nil otherwise; summary says what did not fit.
func (s *Scheduler) complete(ctx context.Context, u *unit, pu placement.Unit, snap *snapshot.Snapshot, res placement.Result, summary string, start time.Time, prio int32) {
	unschedulable := snap != nil
	logger := klog.FromContext(ctx)
	k := u.key
	if len(res.Assignments) > 0 {
		bound, err := s.binder.bind(ctx, res.Assignments)
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
	}
	note, victimsGoing := "", false
	if unschedulable {
		// Place rolled a failed unit back: snap is as the cycle found it.
		note, victimsGoing = s.preempt(ctx, u, pu, snap, prio)
	} else {
		s.noms.drop(k)
	}
	s.reportPlaced(ctx, u, res, summary, note)
	if unschedulable {
		s.observe(start, metrics.ResultUnschedulable)
		s.countDeviceFailures(res)
	} else {
		s.observe(start, metrics.ResultScheduled)
	}
	switch {
	case victimsGoing:
		// Pod and claim events announce the victims' departure.
		s.queue.WaitFor(k, victimPoll)
	case len(res.Unplaced) > 0:
		s.queue.Unschedulable(k)
	default:
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
func (s *Scheduler) countDeviceFailures(res placement.Result) {
	classes := map[string]bool{}
	for _, f := range res.Unplaced {
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
		if !podgroup.Ours(p) {
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

// members resolves each pending pod's claims; the second result explains
// what the unit waits for when a claim does not exist yet.
func (s *Scheduler) members(u *unit) ([]placement.Member, string) {
	out := make([]placement.Member, 0, len(u.Pending))
	for _, p := range u.Pending {
		m := placement.Member{Pod: p}
		for _, pc := range p.Spec.ResourceClaims {
			name, ok := snapshot.ClaimName(p, pc)
			if !ok {
				return nil, fmt.Sprintf("pod %s: waiting for the ResourceClaim of %q to be created from its template", p.Name, pc.Name)
			}
			if _, err := s.listers.claims.ResourceClaims(p.Namespace).Get(name); err != nil {
				return nil, fmt.Sprintf("pod %s: waiting for ResourceClaim %s", p.Name, name)
			}
			m.Claims = append(m.Claims, types.NamespacedName{Namespace: p.Namespace, Name: name})
		}
		out = append(out, m)
	}
	return out, ""
}

// snapshot brings the cache's snapshot up to date for a cycle — assumed
// decisions applied, only what changed since the last cycle copied — with
// the capacity nominated to other preemptors of priority ≥ prio held.
func (s *Scheduler) snapshot(self queue.Key, prio int32) *snapshot.Snapshot {
	snap := s.cache.Update()
	snap.Constraints = s.filters.NewView(snap.NodeObjects(), s.cache.Pods())
	s.noms.reserve(snap, self, prio)
	return snap
}
