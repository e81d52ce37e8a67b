package integrity

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Reasons an incarnation ends with (PodGroup status.incarnation.ended, the
// DisruptionTarget condition of a restart, and lockstep_gang_restarts_total).
const (
	ReasonMemberFailed = "MemberFailed"
	ReasonMemberLost   = "MemberLost"
	ReasonNodeLost     = "NodeLost"
	ReasonDeviceFailed = "DeviceFailed"
	ReasonCompleted    = "Completed"
	ReasonOwnerStopped = "OwnerStopped"
	// PodReason is the DisruptionTarget reason on the pods Lockstep evicts;
	// a Job's podFailurePolicy can ignore it (docs/integrity.md).
	PodReason = "GangRestartByLockstep"
)

// DisruptionTarget reasons other components set on pods they evict.
const (
	reasonTaintManager       = "DeletionByTaintManager"
	reasonDeviceTaintManager = "DeletionByDeviceTaintManager"
	reasonPodGC              = "DeletionByPodGC"
)

// settleDelay: an incarnation holding fewer members than its minCount (a
// binding that failed part way, or a member that left without a trace) is
// restarted only once that has lasted this long after its last binding.
const settleDelay = 5 * time.Second

// Verdict is what Decide concludes; the reconciler writes it.
type Verdict struct {
	// Incarnation is the incarnation as it must be stored; nil leaves it.
	Incarnation *lockv1.PodGroupIncarnation
	// Running is the Running condition as it must be; an empty Type leaves it.
	Running metav1.Condition
	// Restart is set when this verdict ends the incarnation for a loss:
	// recorded once (DisruptionTarget condition, event, metric).
	Restart *Loss
	// Evict are the members to take down now, marked DisruptionTarget with
	// EvictReason and EvictMessage first.
	Evict        []*corev1.Pod
	EvictReason  string
	EvictMessage string
	// RequeueAfter is when the verdict may change without an event (a node
	// grace, a taint toleration or a settle window ending); 0 for never.
	RequeueAfter time.Duration
	// Confirm, when set, is all the verdict says: it would rest on what the
	// caches do not show for sure (View), so it writes nothing; the caller
	// reads these objects from the API server and decides again.
	Confirm *Confirm
	// Unhealthy are the members this verdict acts on for an unhealthy
	// device (a restart, or with disruptionMode single their own eviction):
	// each gets an event on its pod and its group, and counts in
	// lockstep_unhealthy_devices_total, once.
	Unhealthy []UnhealthyMember
}

// Loss is why a gang restarts.
type Loss struct{ Reason, Detail string }

// Decide judges one group: the current incarnation's members only, each by
// its own fate (succeeded is done; failed, deleted, evicted by anyone but the
// scheduler, its node or a device lost is a loss; removed by its owner's
// scale-down or preempted by the scheduler is neither), and what the group's
// state is now. It is pure.
//
// A member is judged deleted, or its node lost, only when the pod cache saw
// it go (a deletion, its delete event) or the API server says so (v.Read):
// a member the pod cache does not hold past the settle window, or a node the
// node cache does not hold or shows NotReady past the grace period, makes
// the verdict Confirm alone.
func Decide(v View) Verdict {
	if v.NamespaceTerminating {
		return Verdict{}
	}
	pg := v.Group
	inc := pg.Status.Incarnation
	pods := map[types.UID]*corev1.Pod{}
	var ours []*corev1.Pod
	for _, p := range v.Pods {
		if podgroup.Ours(p) && podgroup.Admits(pg, p) {
			pods[p.UID] = p
			ours = append(ours, p)
		}
	}
	switch {
	case inc == nil && v.Owner != nil && v.Owner.Suspended:
		// Held (e.g. by Kueue, for quota): not demand, and not the
		// scheduler's to explain — the owner creates no pods until resumed.
		return Verdict{Running: running(pg, metav1.ConditionFalse, lockv1.RunningReasonSuspended, "not admitted yet: "+v.Owner.suspension())}
	case inc == nil:
		return Verdict{Running: running(pg, metav1.ConditionFalse, lockv1.RunningReasonPending, notAdmitted(pg, v.Pods, ours))}
	case inc.Ended != nil:
		return v.ended(inc, pods)
	}
	j := v.judge(inc, pods)
	if !j.confirm.empty() {
		return Verdict{Confirm: &j.confirm}
	}
	next := j.next
	switch {
	case v.Owner != nil && v.Owner.Stopped != "" && !j.completed():
		next.Ended = &lockv1.PodGroupIncarnationEnd{Reason: ReasonOwnerStopped, Message: v.Owner.Name + " is " + v.Owner.Stopped, Time: metav1.NewTime(v.Now)}
		vd := v.ended(next, pods)
		vd.Incarnation, vd.Evict = next, nil
		return vd
	case j.completed():
		next.Ended = &lockv1.PodGroupIncarnationEnd{Reason: ReasonCompleted, Message: j.summary(), Time: metav1.NewTime(v.Now)}
		vd := v.ended(next, pods)
		vd.Incarnation = next
		return vd
	case v.TreeShort != "":
		// The tree lost a whole group: every running group under the
		// scope ends with it (each sees the same shortage), its members
		// evicted as for a tree member's loss.
		loss := &Loss{Reason: ReasonTreeMemberLost, Detail: v.TreeShort}
		next.Ended = &lockv1.PodGroupIncarnationEnd{Reason: ReasonTreeMemberLost, Message: v.TreeShort, Time: metav1.NewTime(v.Now)}
		vd := v.ended(next, pods)
		vd.Incarnation, vd.Restart = next, loss
		return vd
	case j.loss != nil && podgroup.DisruptAll(pg):
		next.Ended = &lockv1.PodGroupIncarnationEnd{Reason: j.loss.Reason, Message: j.loss.Detail, Time: metav1.NewTime(v.Now)}
		vd := v.ended(next, pods)
		vd.Incarnation, vd.Restart = next, j.loss
		// Everything of the group that still holds a node goes, members
		// bound since the last record included.
		vd.Evict = nil
		for _, p := range ours {
			if podgroup.Active(p) && !podgroup.Going(p) {
				vd.Evict = append(vd.Evict, p)
			}
		}
		vd.EvictMessage = fmt.Sprintf("PodGroup %s lost a member (%s); the gang restarts whole", pg.Name, j.loss.Detail)
		vd.Unhealthy = j.unhealthy
		return vd
	}
	vd := Verdict{RequeueAfter: j.requeue}
	vd.evictUnhealthy(pg, j.unhealthy)
	if j.changed {
		vd.Incarnation = next
	}
	msg := j.summary()
	if j.loss != nil {
		msg += fmt.Sprintf("; lost: %s (disruptionMode single: the others keep running)", j.loss.Detail)
	}
	if hasPendingBeyond(next, ours) {
		msg += "; members added later wait to be placed together"
	}
	vd.Running = running(pg, metav1.ConditionTrue, lockv1.RunningReasonRunning, msg)
	return vd
}

// judgement is one pass over the current incarnation's members.
type judgement struct {
	next                     *lockv1.PodGroupIncarnation
	changed                  bool
	live, succeeded, removed int
	loss                     *Loss
	requeue                  time.Duration
	// gone are members deleted or missing, judged once all are seen.
	gone        []gone
	preempted   int
	incarnation int32
	// confirm is what the caches may show wrongly and a loss would rest on.
	confirm Confirm
	// unhealthy are members on a device reported Unhealthy.
	unhealthy []UnhealthyMember
}

// gone is a member that was deleted (pod still there) or vanished (nil).
type gone struct {
	i   int
	pod *corev1.Pod
}

func (v View) judge(inc *lockv1.PodGroupIncarnation, pods map[types.UID]*corev1.Pod) *judgement {
	j := &judgement{next: inc.DeepCopy(), incarnation: inc.Number}
	for i := range j.next.Members {
		m := &j.next.Members[i]
		switch m.Outcome {
		case lockv1.MemberSucceeded:
			j.succeeded++
			continue
		case lockv1.MemberRemoved:
			j.removed++
			continue
		}
		p, departed, known := v.memberPod(m.UID, pods)
		v.judgeMember(j, i, p, departed, known)
	}
	v.judgeGone(j)
	if j.loss == nil && podgroup.IsGang(v.Group) {
		// Members a scale-down removed lower the need before the group's
		// minCount is lowered to match.
		need := min(int(j.next.MinCount), podgroup.MinCount(v.Group)) - j.removed
		if have := j.live + j.succeeded; have < need && j.preempted == 0 {
			if wait := j.next.LastBoundTime.Add(settleDelay).Sub(v.Now); wait > 0 {
				j.soon(wait)
			} else {
				j.loss = &Loss{ReasonMemberLost, fmt.Sprintf("only %d of minCount %d members are running", have, need)}
			}
		}
	}
	return j
}

// judgeMember classifies one member without an outcome; p is its pod, or
// the last state of a pod already deleted (departed), or nil; known is false
// when neither the caches nor a read have it (memberPod).
func (v View) judgeMember(j *judgement, i int, p *corev1.Pod, departed, known bool) {
	m := &j.next.Members[i]
	removed := m.Index != nil && v.Owner != nil && v.Owner.Wants != nil && !v.Owner.Wants(*m.Index)
	left := p == nil || departed || p.DeletionTimestamp != nil
	switch {
	case p != nil && podgroup.Succeeded(p):
		j.setOutcome(m, lockv1.MemberSucceeded)
	case p != nil && podgroup.HasDisruption(p, corev1.PodReasonPreemptionByScheduler):
		// The scheduler evicted it and records the preemption itself.
		j.preempted++
	case removed && (left || podgroup.Terminal(p)):
		j.setOutcome(m, lockv1.MemberRemoved)
	case p == nil && v.Now.Sub(j.next.LastBoundTime.Time) < settleDelay:
		// Recorded just now and not in this cache yet (the scheduler's
		// informer saw it first): bound, not gone. A deletion would have
		// left its last state in Departed.
		j.live++
		j.soon(j.next.LastBoundTime.Add(settleDelay).Sub(v.Now))
	case !known:
		// Deleted without a delete event seen, or created after the pod
		// cache last caught up (an informer behind the PodGroup's after an
		// API server restart): only the API server can tell.
		j.confirm.Pods = append(j.confirm.Pods, *m)
		j.live++
	case left:
		j.gone = append(j.gone, gone{i: i, pod: p})
	case p.Status.Phase == corev1.PodFailed && unhealthy(p) != nil && podgroup.Disruption(p) == nil:
		// Its last health report, frozen when it ended, says why.
		d := unhealthy(p)
		j.lose(ReasonDeviceUnhealthy, fmt.Sprintf("pod %s failed%s; its %s", p.Name, exitDetail(p), d))
		j.unhealthy = append(j.unhealthy, UnhealthyMember{Pod: p, Device: *d})
	case p.Status.Phase == corev1.PodFailed:
		j.lose(disruptionReason(p, ReasonMemberFailed), fmt.Sprintf("pod %s failed%s", p.Name, exitDetail(p)))
	case p.Spec.NodeName == "":
		// Recorded as bound, not yet seen bound here: the cache lags.
		j.live++
	default:
		j.live++
		v.nodeOrDeviceLost(j, p)
		j.deviceUnhealthy(p)
	}
}

// evictUnhealthy takes down alone, for a group whose members may be
// disrupted one by one (disruptionMode single), each member still running
// on an unhealthy device, so its owner recreates it; members already going
// are not taken down again.
func (vd *Verdict) evictUnhealthy(pg *lockv1.PodGroup, members []UnhealthyMember) {
	if podgroup.DisruptAll(pg) {
		return
	}
	for _, u := range members {
		if !podgroup.Active(u.Pod) || podgroup.Going(u.Pod) {
			continue
		}
		vd.Evict = append(vd.Evict, u.Pod)
		vd.Unhealthy = append(vd.Unhealthy, u)
		vd.EvictReason = PodReasonDeviceUnhealthy
		vd.EvictMessage = fmt.Sprintf("PodGroup %s (disruptionMode single): this member's %s; it is taken down alone", pg.Name, u.Device)
	}
	if len(vd.Unhealthy) > 1 {
		vd.EvictMessage = fmt.Sprintf("PodGroup %s (disruptionMode single): a device of this member is Unhealthy (see its events); it is taken down alone", pg.Name)
	}
}

// judgeGone decides the members that were deleted or vanished: removed by a
// scale-down of a group of bare pods (its minCount was lowered and the rest
// still meet it), else lost.
func (v View) judgeGone(j *judgement) {
	if len(j.gone) == 0 {
		return
	}
	if v.Owner == nil && podgroup.IsGang(v.Group) {
		now := podgroup.MinCount(v.Group)
		if now < int(j.next.MinCount) && j.live+j.succeeded >= now {
			for _, g := range j.gone {
				j.setOutcome(&j.next.Members[g.i], lockv1.MemberRemoved)
			}
			j.gone = nil
			return
		}
	}
	// The owner scaled its pods down to those that remain: the deleted
	// ones were removed, not lost.
	scaledDown := v.Owner != nil && v.Owner.Size > 0 && j.live+j.succeeded >= v.Owner.Size
	for _, g := range j.gone {
		if scaledDown && (g.pod == nil || g.pod.Status.Phase != corev1.PodFailed) {
			j.setOutcome(&j.next.Members[g.i], lockv1.MemberRemoved)
			continue
		}
		if g.pod == nil {
			j.lose(ReasonMemberLost, fmt.Sprintf("pod %s was deleted", j.next.Members[g.i].Name))
			continue
		}
		if _, ok, _ := v.node(g.pod.Spec.NodeName); g.pod.Spec.NodeName != "" && !ok {
			j.lose(ReasonNodeLost, fmt.Sprintf("node %s of pod %s was deleted", g.pod.Spec.NodeName, g.pod.Name))
			continue
		}
		if g.pod.Status.Phase == corev1.PodFailed && podgroup.Disruption(g.pod) == nil && !stoppedByDeletion(g.pod) {
			j.lose(ReasonMemberFailed, fmt.Sprintf("pod %s failed%s", g.pod.Name, exitDetail(g.pod)))
			continue
		}
		detail := exitDetail(g.pod)
		if podgroup.Disruption(g.pod) == nil && stoppedByDeletion(g.pod) {
			detail = "" // the signal its deletion sent: no news
		}
		j.lose(disruptionReason(g.pod, ReasonMemberLost), fmt.Sprintf("pod %s was deleted%s", g.pod.Name, detail))
	}
}

func (j *judgement) setOutcome(m *lockv1.PodGroupMember, o lockv1.MemberOutcome) {
	m.Outcome = o
	j.changed = true
	if o == lockv1.MemberSucceeded {
		j.succeeded++
	} else {
		j.removed++
	}
}

// lose keeps the first loss found (members are judged in record order).
func (j *judgement) lose(reason, detail string) {
	if j.loss == nil {
		j.loss = &Loss{Reason: reason, Detail: detail}
	}
}

// confirmNode asks for a node to be read (once).
func (j *judgement) confirmNode(name string) {
	if !slices.Contains(j.confirm.Nodes, name) {
		j.confirm.Nodes = append(j.confirm.Nodes, name)
	}
}

func (j *judgement) soon(d time.Duration) {
	if j.requeue == 0 || d < j.requeue {
		j.requeue = d
	}
}

// completed: every member left without loss, at least one by finishing.
func (j *judgement) completed() bool {
	return j.live == 0 && j.loss == nil && j.preempted == 0 && len(j.gone) == 0 && j.succeeded > 0 &&
		j.succeeded+j.removed == len(j.next.Members)
}

func (j *judgement) summary() string {
	parts := []string{fmt.Sprintf("incarnation %d: %d of %d members running", j.incarnation, j.live, len(j.next.Members))}
	if j.succeeded > 0 {
		parts = append(parts, fmt.Sprintf("%d succeeded", j.succeeded))
	}
	if j.removed > 0 {
		parts = append(parts, fmt.Sprintf("%d removed by a scale-down", j.removed))
	}
	if j.live == 0 && j.succeeded > 0 && j.succeeded+j.removed == len(j.next.Members) {
		parts[0] = fmt.Sprintf("incarnation %d: all %d members finished", j.incarnation, len(j.next.Members))
	}
	return strings.Join(parts, ", ")
}

// ended is the verdict for an incarnation that is over: the state it leaves
// the group in, and the members still to evict when a restart or a
// preemption was interrupted before it had evicted them all.
func (v View) ended(inc *lockv1.PodGroupIncarnation, pods map[types.UID]*corev1.Pod) Verdict {
	pg, end := v.Group, inc.Ended
	var vd Verdict
	switch end.Reason {
	case ReasonCompleted:
		vd.Running = running(pg, metav1.ConditionFalse, lockv1.RunningReasonCompleted, end.Message)
		return vd
	case ReasonOwnerStopped:
		reason, msg := lockv1.RunningReasonFailed, fmt.Sprintf("incarnation %d ended: %s", inc.Number, end.Message)
		switch {
		case v.Owner == nil:
		case v.Owner.Suspended:
			reason = lockv1.RunningReasonSuspended
			if v.Owner.Held != "" {
				msg += "; " + v.Owner.Held
			}
		case v.Owner.Stopped == "":
			reason, msg = lockv1.RunningReasonPending, msg+"; "+v.Owner.Name+" runs again: waiting for its pods to be placed together"
		case !v.Owner.Failed:
			reason = lockv1.RunningReasonCompleted
		}
		vd.Running = running(pg, metav1.ConditionFalse, reason, msg)
		return vd
	case lockv1.PodGroupReasonPreemption:
		vd.Running = running(pg, metav1.ConditionFalse, lockv1.RunningReasonPreempted,
			fmt.Sprintf("incarnation %d was preempted (%s); it is placed whole again when there is room", inc.Number, end.Message))
		vd.EvictReason = corev1.PodReasonPreemptionByScheduler
	default:
		msg := fmt.Sprintf("incarnation %d lost a member (%s): restarting the whole gang", inc.Number, end.Message)
		if end.Reason == lockv1.PodGroupReasonNodeInterrupted {
			msg = fmt.Sprintf("incarnation %d was interrupted (%s): restarting the whole gang elsewhere", inc.Number, end.Message)
		}
		if end.Reason == ReasonTreeMemberLost {
			msg = fmt.Sprintf("incarnation %d ended with its tree (%s): restarting the whole gang", inc.Number, end.Message)
		}
		reason := lockv1.RunningReasonRestarting
		switch {
		case v.Owner == nil:
			reason = lockv1.RunningReasonFailed
			msg += fmt.Sprintf("; no controller recreates bare pods: create them again (label %s=%s) to run it again", lockv1.PodGroupLabel, pg.Name)
		case v.Owner.Stopped != "":
			reason = lockv1.RunningReasonFailed
			if v.Owner.Suspended {
				reason = lockv1.RunningReasonSuspended
				msg += "; " + v.Owner.suspension()
			} else {
				msg += "; " + v.Owner.Name + " is " + v.Owner.Stopped
			}
		default:
			msg += "; waiting for " + v.Owner.Name + " to recreate its pods"
		}
		vd.Running = running(pg, metav1.ConditionFalse, reason, msg)
		vd.EvictReason = PodReason
		vd.EvictMessage = fmt.Sprintf("PodGroup %s lost a member (%s); the gang restarts whole", pg.Name, end.Message)
		if end.Reason == ReasonTreeMemberLost {
			vd.EvictMessage = fmt.Sprintf("PodGroup %s restarts with its tree: %s", pg.Name, end.Message)
		}
	}
	for _, m := range inc.Members {
		if p := pods[m.UID]; p != nil && podgroup.Active(p) && !podgroup.Going(p) {
			vd.Evict = append(vd.Evict, p)
		}
	}
	if vd.EvictMessage == "" {
		vd.EvictMessage = fmt.Sprintf("PodGroup %s was preempted whole (%s)", pg.Name, end.Message)
	}
	return vd
}

// suspension says that the owner is suspended, and what it waits for when
// a queue holds it.
func (o *Owner) suspension() string {
	msg := o.Name + " is " + o.Stopped
	if o.Held != "" {
		msg += ", " + o.Held
	}
	return msg
}

// notAdmitted is the Running message of a group never admitted. It points
// at the scheduler's condition only when the group has it; else it says
// what this controller sees. It counts nothing, so creating members one by
// one does not rewrite it.
func notAdmitted(pg *lockv1.PodGroup, all, ours []*corev1.Pod) string {
	const prefix = "not admitted yet: "
	if meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled) != nil {
		return prefix + "see condition " + lockv1.PodGroupInitiallyScheduled
	}
	if len(ours) == 0 {
		for _, p := range all {
			if !podgroup.Ours(p) {
				return prefix + "its pods are not scheduled by Lockstep: set spec.schedulerName: " + lockv1.SchedulerName + " on them"
			}
		}
		return fmt.Sprintf("%sit has no member pods yet (label %s=%s)", prefix, lockv1.PodGroupLabel, pg.Name)
	}
	gated := 0
	for _, p := range ours {
		if podgroup.Pending(p) {
			if !podgroup.Gated(p) {
				return prefix + "waiting for the scheduler to consider it"
			}
			gated++
		}
	}
	if gated > 0 {
		return prefix + "every pending member has scheduling gates (spec.schedulingGates); the scheduler considers it once they are removed"
	}
	return prefix + "waiting for the scheduler to consider it"
}

// hasPendingBeyond reports whether the group has pending Lockstep pods
// outside the incarnation (a resize waits to be placed).
func hasPendingBeyond(inc *lockv1.PodGroupIncarnation, pods []*corev1.Pod) bool {
	listed := map[types.UID]bool{}
	for _, m := range inc.Members {
		listed[m.UID] = true
	}
	for _, p := range pods {
		if podgroup.Pending(p) && !listed[p.UID] {
			return true
		}
	}
	return false
}

// disruptionReason maps who evicted a pod to the restart reason: a node's
// taint manager or pod GC means its node is lost, the device taint manager
// means a device failed; anything else is def.
func disruptionReason(p *corev1.Pod, def string) string {
	c := podgroup.Disruption(p)
	if c == nil {
		return def
	}
	switch c.Reason {
	case reasonTaintManager, reasonPodGC:
		return ReasonNodeLost
	case reasonDeviceTaintManager:
		return ReasonDeviceFailed
	}
	return def
}

// stoppedByDeletion reports whether a pod marked for deletion failed only
// because the deletion stopped it: every container that ended unsuccessfully
// was killed by a signal (exit 143 after SIGTERM, 137 after SIGKILL). The
// kubelet reports such a pod Failed before it goes; it was deleted, not
// failed on its own. A rank that exited otherwise failed on its own, whether
// or not someone deleted it afterwards.
func stoppedByDeletion(p *corev1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && !slices.Contains(podgroup.StopExitCodes, t.ExitCode) {
			return false
		}
	}
	return true
}

// exitDetail is " (container x exited 1: Error)" for the first container
// that ended unsuccessfully, or "".
func exitDetail(p *corev1.Pod) string {
	if c := podgroup.Disruption(p); c != nil {
		return fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf(" (container %s exited %d: %s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	return ""
}

func running(pg *lockv1.PodGroup, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: lockv1.Running, Status: status, Reason: reason, Message: msg, ObservedGeneration: pg.Generation}
}
