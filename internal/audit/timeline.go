package audit

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// span is one pod's life as its timestamps tell it.
//
//	created ──pending──▶ bound ──holding──▶ end
//	created ──pending──────────────────────▶ end   (never bound)
//
// end is nil while the pod still waits or holds at the audit.
type span struct {
	pod       *corev1.Pod
	created   time.Time
	bound     *time.Time
	end       *time.Time
	succeeded bool
	extended  devices
	claims    []claimUse
	// needed is set by the sweep: the pod is one the workload needs to
	// run (not a scale-up beyond a size it had run whole at).
	needed bool
	// estimated say which of its times are not read from the pod.
	estimated []string
	// takedown: when and why the pod was taken down, if it was.
	takedown *takedown
	// gone: the pod no longer exists; the span stands for it from the
	// Preempted event that names it (attributeEvents).
	gone bool
}

// takedown is a pod's DisruptionTarget condition, or a Preempted event.
type takedown struct {
	at                      time.Time
	reason, message, source string
	// attributedBy: how an event was tied to the pod ("uid", "name").
	attributedBy string
}

// Estimates of a span's times.
const (
	estBoundFromStart = "the bind time of pods without a PodScheduled=True condition is their start time (or creation)"
	estEndFromStatus  = "the end of finished pods without a container finish time is their last condition change (or deletion)"
)

func spanOf(p *corev1.Pod, ci claimIndex, now time.Time) *span {
	s := &span{pod: p, created: p.CreationTimestamp.Time, succeeded: podgroup.Succeeded(p), extended: extended(p), claims: ci.claimsOf(p)}
	if s.created.After(now) { // the API server's clock ahead of the audit's
		s.created = now
	}
	if c := condition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
		s.bound = clampPtr(c.LastTransitionTime.Time, s.created, now)
	} else if p.Spec.NodeName != "" {
		t := s.created
		if p.Status.StartTime != nil {
			t = p.Status.StartTime.Time
		}
		s.bound = clampPtr(t, s.created, now)
		s.estimated = append(s.estimated, estBoundFromStart)
	}
	if podgroup.Terminal(p) {
		from := s.created
		if s.bound != nil {
			from = *s.bound
		}
		t, exact := endOf(p)
		s.end = clampPtr(t, from, now)
		if !exact {
			s.estimated = append(s.estimated, estEndFromStatus)
		}
	}
	if c := podgroup.Disruption(p); c != nil {
		s.takedown = &takedown{at: c.LastTransitionTime.Time, reason: c.Reason, message: c.Message, source: "pod"}
	}
	for _, c := range s.claims {
		if c.estimated != "" {
			s.estimated = append(s.estimated, c.estimated)
		}
	}
	return s
}

// endOf is when a finished pod stopped holding its node: its last
// container's finish time (exact), else its last condition change, else
// its deletion.
func endOf(p *corev1.Pod) (t time.Time, exact bool) {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
				t, exact = term.FinishedAt.Time, true
			}
		}
	}
	if exact {
		return t, true
	}
	for _, c := range p.Status.Conditions {
		if c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	if t.IsZero() && p.DeletionTimestamp != nil {
		t = p.DeletionTimestamp.Time
	}
	return t, false
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func clampPtr(t, lo, hi time.Time) *time.Time {
	if t.Before(lo) {
		t = lo
	}
	if t.After(hi) {
		t = hi
	}
	return &t
}

// holdingAt reports whether the pod held its node at t.
func (s *span) holdingAt(t time.Time) bool {
	return s.bound != nil && !s.bound.After(t) && (s.end == nil || s.end.After(t))
}

// devicesWith adds the span's devices to held, counting each claim once
// across pods (refs counts the holders of each claim); sign -1 removes.
func (s *span) devicesWith(held devices, refs map[string]int, sign int) {
	held.add(s.extended, int64(sign))
	for _, c := range s.claims {
		before := refs[c.key]
		refs[c.key] += sign
		if before == 0 && sign > 0 || refs[c.key] == 0 && sign < 0 {
			held.add(c.devices, int64(sign))
		}
	}
}

// unschedulable reports whether the scheduler tried the pending pod and
// found no node for it.
func unschedulable(p *corev1.Pod) bool {
	c := condition(p, corev1.PodScheduled)
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && !podgroup.Gated(p)
}
