package scheduler

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Event reasons.
const (
	eventScheduled        = "Scheduled"
	eventFailedScheduling = "FailedScheduling"
	eventWaiting          = "WaitingForPodGroup"
)

// reportWaiting writes why a unit waits before placement: a flat group's
// condition (a lone pod's event); for a tree, its root's condition and the
// condition of each group that waits on its own.
func (s *Scheduler) reportWaiting(ctx context.Context, u *unit, d decide.Decision) {
	if f := u.tree.Flat(); f != nil {
		s.groupWaiting(ctx, &group{key: u.key, Unit: f}, d.Reason, d.WaitReason)
		return
	}
	s.setCompositeCondition(ctx, u.root, metav1.ConditionFalse, waitReason(d.WaitReason), d.Reason)
	for _, g := range u.leaves() {
		if g.Waiting != "" {
			s.groupWaiting(ctx, g, g.Waiting, g.WaitReason)
		}
	}
}

func (s *Scheduler) groupWaiting(ctx context.Context, g *group, why, reason string) {
	if g.Group == nil {
		for _, p := range g.Pending {
			s.recorder.Eventf(p, nil, corev1.EventTypeNormal, eventWaiting, "Scheduling", why)
		}
		return
	}
	s.setCondition(ctx, g.Group, metav1.ConditionFalse, waitReason(reason), why)
}

// reportError writes that the unit could not be decided or bound: on its
// root (a tree's), its PodGroup, or its pod.
func (s *Scheduler) reportError(ctx context.Context, u *unit, err error) {
	msg := "scheduler error: " + err.Error()
	if u.root != nil {
		s.setCompositeCondition(ctx, u.root, metav1.ConditionFalse, lockv1.PodGroupReasonSchedulerError, msg)
		s.recorder.Eventf(u.root, nil, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", "%s", msg)
		return
	}
	g := &group{key: u.key, Unit: u.tree.Flat()}
	if g.Group != nil {
		s.setCondition(ctx, g.Group, metav1.ConditionFalse, lockv1.PodGroupReasonSchedulerError, msg)
		s.recorder.Eventf(g.Group, nil, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", msg)
		return
	}
	for _, p := range g.Pending {
		// The condition carries the current message (events with the same
		// reason are folded into a series that keeps the first note).
		if s.podStatus.set(p, podReasonSchedulerError, msg, p.Status.NominatedNodeName) {
			s.recorder.Eventf(p, nil, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", msg)
		}
	}
}

// podReasonSchedulerError is kube-scheduler's PodScheduled reason for a pod
// that could not be scheduled because of an error.
const podReasonSchedulerError = "SchedulerError"

// reportUnplaced writes what a decision that admits nothing means (it
// does not fit, or preempts): for a flat unit its group's and pods'
// conditions (groupPlaced), for a tree its composites', groups' and pods'
// (reportTree). note (preemption's outcome) is appended to the message.
func (s *Scheduler) reportUnplaced(ctx context.Context, u *unit, d decide.Decision, note string) {
	if f := u.tree.Flat(); f != nil {
		s.groupPlaced(ctx, &group{key: u.key, Unit: f}, d, note)
		return
	}
	s.reportTree(ctx, u, d, note)
}

// groupPlaced writes what a decision means for one group (its leaf's
// Outcome): the PodGroup condition, a pod condition for each member left
// pending, and events. note (preemption's outcome) is appended to the
// message of a group that did not fit.
func (s *Scheduler) groupPlaced(ctx context.Context, g *group, d decide.Decision, note string) {
	o := d.Outcome
	for _, a := range d.Result.Assignments {
		s.recorder.Eventf(a.Pod, nil, corev1.EventTypeNormal, eventScheduled, "Binding", "Successfully assigned %s/%s to %s", a.Pod.Namespace, a.Pod.Name, a.Node)
	}
	msg := d.Summary
	if msg != "" && note != "" {
		msg += "; " + note
	}
	if len(o.Waiting) > 0 {
		nominated := s.nominatedNodes(g.key)
		message := podMessages(g, d, note)
		for _, f := range o.Waiting {
			pm := message(f)
			// Condition and event only when the pod's message changes: a
			// unit retried for an hour writes nothing new.
			if s.setPodUnschedulable(f.Pod, pm, nominated[f.Pod.UID]) {
				s.recorder.Eventf(f.Pod, g.related(), corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", "%s", pm)
			}
		}
	}
	if g.Group == nil {
		return
	}
	if o.Admitted {
		placed := g.Bound + len(d.Result.Assignments)
		s.setCondition(ctx, g.Group, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled, placedMessage(placed, o.Total, g.MinCount()))
		s.recorder.Eventf(g.Group, nil, corev1.EventTypeNormal, eventScheduled, "Scheduling", "placed %d pods; %d of %d pods now bound", len(d.Result.Assignments), placed, o.Total)
		return
	}
	if g.Bound > 0 && g.Bound >= g.MinCount() {
		// A running gang whose later members do not fit stays Scheduled
		// (InitiallyScheduled never goes back to False), but its counts
		// follow the members it has now: a member created after the gang
		// was placed is counted, not left out of a stale "3 of 3".
		s.setCondition(ctx, g.Group, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled, placedMessage(g.Bound, o.Total, g.MinCount()))
	} else {
		s.setCondition(ctx, g.Group, metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable, msg)
	}
	s.recorder.Eventf(g.Group, nil, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", "%s", msg)
}

// placedMessage is a Scheduled group's condition message.
func placedMessage(placed, total, minCount int) string {
	return fmt.Sprintf("%d of %d pods placed (minCount %d)", placed, total, minCount)
}

// reportBound writes the conditions a unit with nothing pending has earned
// when no one wrote them — a scheduler that died between binding the unit
// and writing its status: each group's InitiallyScheduled=True once its
// bound members reach minCount, each composite's once its children meet
// its minGroupCount. A condition that is True already is left as it is,
// so a running unit costs no write.
func (s *Scheduler) reportBound(ctx context.Context, u *unit) {
	u.tree.Root.Walk(func(n *podgroup.Tree) {
		if g := n.Unit; g != nil {
			if g.Group == nil || g.Bound == 0 || g.Bound < g.MinCount() || meta.IsStatusConditionTrue(g.Group.Status.Conditions, lockv1.PodGroupInitiallyScheduled) {
				return
			}
			s.setCondition(ctx, g.Group, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled, placedMessage(g.Bound, len(g.Members), g.MinCount()))
			return
		}
		whole, counted, of := n.BoundWhole()
		if !whole || meta.IsStatusConditionTrue(n.Composite.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled) {
			return
		}
		_, need := podgroup.CompositeGang(n.Composite)
		s.setCompositeCondition(ctx, n.Composite, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled,
			fmt.Sprintf("%d of %d groups placed (minGroupCount %d)", counted, of, max(need, 1)))
	})
}

// related is the group's PodGroup as an event's related object; nil (not
// a typed nil) for a lone pod.
func (g *group) related() runtime.Object {
	if g.Group != nil {
		return g.Group
	}
	return nil
}

// podMessages gives a pending member's PodScheduled message. A lone pod's
// is kube-scheduler's ("0/3 nodes are available: …", with the preemption
// note). A group member's names its group and a cause that does not
// change with capacity — counts that do go on the group's condition, so a
// gang of thousands is not rewritten pod by pod as nodes fill and drain:
// a gang below minCount speaks for the whole gang, in one message built
// once for all its members; a member that waits on its own (a basic
// group's, a gang's beyond minCount) gives its own cause.
func podMessages(g *group, d decide.Decision, note string) func(placement.Failure) string {
	var gangWide string
	return func(f placement.Failure) string {
		if speaksForGang(g, d.Outcome, f) {
			if gangWide == "" {
				gangWide = podMessage(g, d, f, note)
			}
			return gangWide
		}
		return podMessage(g, d, f, note)
	}
}

// speaksForGang reports whether a member's message is its gang's: the gang
// is below minCount, or the member is not placed because the gang is not.
func speaksForGang(g *group, o placement.Outcome, f placement.Failure) bool {
	return g.Group != nil && g.Gang() && (!o.MinCountMet() || f.ForGang())
}

// podMessage is one member's message (podMessages).
func podMessage(g *group, d decide.Decision, f placement.Failure, note string) string {
	o := d.Outcome
	switch {
	case g.Group == nil && note != "":
		return f.Diagnosis.String() + "; " + note
	case g.Group == nil:
		return f.Diagnosis.String()
	case speaksForGang(g, o, f):
		return fmt.Sprintf("PodGroup %s: %s", g.Group.Name, gangCause(d))
	case g.Gang():
		return fmt.Sprintf("PodGroup %s has reached minCount %d; this pod joins it when it fits: %s", g.Group.Name, o.MinCount, f.Diagnosis.Causes())
	}
	return fmt.Sprintf("PodGroup %s: this pod does not fit: %s", g.Group.Name, f.Diagnosis.Causes())
}

// gangCause is why a gang below minCount is not placed, in words that
// change only when the cause does.
func gangCause(d decide.Decision) string {
	min := d.Outcome.MinCount
	if d.Kind == decide.Preempt {
		return fmt.Sprintf("preempting lower-priority pods to make room for the gang (minCount %d); this pod waits for them to go", min)
	}
	if d.Outcome.SearchExhausted {
		return fmt.Sprintf("minCount %d: no placement found within the search budget; one may exist (the PodGroup's %s condition says more)", min, lockv1.PodGroupInitiallyScheduled)
	}
	cause := "not enough room"
	for _, f := range d.Outcome.Waiting {
		if !f.ForGang() {
			cause = f.Diagnosis.Causes()
			break
		}
	}
	return fmt.Sprintf("minCount %d not satisfiable: %s (the PodGroup's %s condition has the arithmetic)", min, cause, lockv1.PodGroupInitiallyScheduled)
}

// setCondition writes the PodGroupInitiallyScheduled condition if it
// changed. Once True it stays True (upstream semantics: it records that the
// group was admitted once).
func (s *Scheduler) setCondition(ctx context.Context, pg *lockv1.PodGroup, status metav1.ConditionStatus, reason, msg string) {
	s.setGroupCondition(ctx, pg, metav1.Condition{Type: lockv1.PodGroupInitiallyScheduled, Status: status, Reason: reason, Message: msg})
}

// setGroupCondition writes a PodGroup condition if it changed.
func (s *Scheduler) setGroupCondition(ctx context.Context, pg *lockv1.PodGroup, cond metav1.Condition) {
	s.updateGroupStatus(ctx, pg, "condition "+cond.Type, func(cur *lockv1.PodGroup) bool {
		old := meta.FindStatusCondition(cur.Status.Conditions, cond.Type)
		if cond.Type == lockv1.PodGroupInitiallyScheduled && old != nil && old.Status == metav1.ConditionTrue && cond.Status != metav1.ConditionTrue {
			return false
		}
		if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
			return false
		}
		if cond.Type == lockv1.PodGroupInitiallyScheduled && cond.Status == metav1.ConditionTrue && (old == nil || old.Status != metav1.ConditionTrue) {
			s.metrics.TimeToScheduled.WithLabelValues(strconv.Itoa(int(s.groupPriority(cur)))).Observe(s.clock.Since(cur.CreationTimestamp.Time).Seconds())
		}
		c := cond
		c.ObservedGeneration = cur.Generation
		meta.SetStatusCondition(&cur.Status.Conditions, c)
		return true
	})
}

// recordIncarnation writes, once members are bound, the incarnation they
// belong to: the current one when it still runs (a resize step), else the
// next (podgroup.Record). The integrity controller judges only recorded
// members, so a gang is never judged while it is being bound. The
// incarnation's minCount is the one the decision admitted them with (g's),
// not the group's at write time: a resize raising minCount while they were
// bound (4 → 40) must not make the integrity controller ask 40 of an
// incarnation admitted at 4 and restart it.
func (s *Scheduler) recordIncarnation(ctx context.Context, g *group, bound []*corev1.Pod) {
	now := metav1.NewTime(s.clock.Now())
	admitted := int32(g.MinCount())
	s.updateGroupStatus(ctx, g.Group, "incarnation", func(cur *lockv1.PodGroup) bool {
		next := podgroup.Record(cur.Status.Incarnation, admitted, g.Pods, bound, now)
		if cur.Status.Incarnation != nil && len(next.Members) == len(cur.Status.Incarnation.Members) && next.Number == cur.Status.Incarnation.Number {
			return false
		}
		cur.Status.Incarnation = next
		return true
	})
}

// updateGroupStatus applies mutate to the group's status and writes it when
// mutate reports a change, retrying on conflict with the API server's copy
// (the informer's may lag behind the integrity controller's writes).
func (s *Scheduler) updateGroupStatus(ctx context.Context, pg *lockv1.PodGroup, what string, mutate func(*lockv1.PodGroup) bool) {
	logger := klog.FromContext(ctx)
	gvr := podgroup.ResourceOf(pg)
	fresh := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur *lockv1.PodGroup
		var err error
		if fresh {
			var u *unstructured.Unstructured
			if u, err = s.dynamic.Resource(gvr).Namespace(pg.Namespace).Get(ctx, pg.Name, metav1.GetOptions{}); err == nil {
				cur, err = podgroup.FromUnstructured(u)
			}
		} else {
			cur, err = s.podGroup(pg.Namespace, pg.Name)
		}
		fresh = true
		if err != nil {
			return err
		}
		if !mutate(cur) {
			return nil
		}
		obj, err := podgroup.ToUnstructured(cur)
		if err != nil {
			return err
		}
		_, err = s.dynamic.Resource(gvr).Namespace(pg.Namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		logger.Error(err, "Writing PodGroup status", "podGroup", klog.KObj(pg), "what", what)
	}
}

// setPodUnschedulable asks for PodScheduled=False/Unschedulable on a pod,
// and status.nominatedNodeName to the node a preemption holds for it (""
// when none), written in one patch off the scheduling loop
// (podStatusWriter). It reports whether that is news to the pod.
func (s *Scheduler) setPodUnschedulable(p *corev1.Pod, msg, nominated string) bool {
	return s.podStatus.set(p, corev1.PodReasonUnschedulable, msg, nominated)
}
