package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Event reasons of preemption.
const (
	eventPreempting = "Preempting"
	eventPreempted  = "Preempted"
	// eventNotPreempting says why a unit that does not fit preempts nothing.
	eventNotPreempting = "NotPreempting"
)

// nominationSlack is how long past its victims' grace period a nomination
// waits for them before the preemptor plans again.
const nominationSlack = preemption.NominationSlack

// name is how events name the unit: its tree's root, its PodGroup, or its
// pod.
func (u *unit) name() string {
	if u.root != nil {
		return fmt.Sprintf("CompositePodGroup %s/%s", u.root.Namespace, u.root.Name)
	}
	return u.tree.Root.Name()
}

// object is what the unit's events are about: its tree's root, its
// PodGroup, or its pod.
func (u *unit) object() runtime.Object {
	f := u.tree.Flat()
	switch {
	case u.root != nil:
		return u.root
	case f.Group != nil:
		return f.Group
	}
	return f.Pending[0]
}

// related is the unit's root or PodGroup as an event's related object;
// nil (not a typed nil) for a lone pod.
func (u *unit) related() runtime.Object {
	if f := u.tree.Flat(); f != nil && f.Group == nil {
		return nil
	}
	return u.object()
}

// pending counts the members the unit places (in every leaf).
func (u *unit) pending() int { return u.tree.Root.Pending() }

// preempt carries out the preemption part of a decision for a unit that
// did not fit: it evicts the plan's victims and nominates the unit for
// what they free, or notes the preemption under way. It returns a note for
// the unit's condition while a preemption is under way (and then true:
// retry soon, victims are terminating); when preemption cannot help it
// says why in a NotPreempting event and returns "".
func (s *Scheduler) preempt(ctx context.Context, u *unit, prio int32, d decide.Decision) (string, bool) {
	logger := klog.FromContext(ctx)
	switch {
	case d.Kind == decide.Unschedulable:
		if d.Reason != "" {
			logger.V(2).Info("Preemption cannot help", "why", d.Reason)
			s.recorder.Eventf(u.object(), nil, corev1.EventTypeNormal, eventNotPreempting, "Preempting", "%s", d.Reason)
		}
		return "", false
	case d.Plan == nil:
		return d.Reason, true
	}
	plan := d.Plan
	now := s.clock.Now()
	nom := plan.Nomination(prio, now)
	if !plan.WaitUntil.IsZero() {
		// A short wait instead: the pods that declared they end soon are
		// held for it as victims already going are; nothing is evicted.
		nom.Waiting = fmt.Sprintf("waiting until %s for %s to end as declared, instead of preempting %s", plan.WaitUntil.UTC().Format(time.RFC3339), strings.Join(candidateNames(plan.Terminating), ", "), plan.Instead)
		s.state.Cache.Nominate(u.key.String(), nom)
		s.notices.set(u.key, nil)
		logger.Info("Waiting instead of preempting", "until", plan.WaitUntil, "for", candidateNames(plan.Terminating), "instead", plan.Instead)
		s.recorder.Eventf(u.object(), nil, corev1.EventTypeNormal, eventNotPreempting, "Preempting", "%s", nom.Waiting)
		return nom.Waiting, true
	}
	// Victims that asked for notice are told first and evicted when they
	// acknowledge or it ends; the nomination holds what they will free
	// until then.
	evictNow, noticed := splitByNotice(plan.Victims, now)
	noticeNote := ""
	if len(noticed) > 0 {
		last := s.giveNotice(ctx, u, prio, noticed, now)
		if until := last.Add(nom.Deadline.Sub(now)); until.After(nom.Deadline) {
			nom.Deadline = until
		}
		noticeNote = fmt.Sprintf("; %s given notice until %s to checkpoint", strings.Join(candidateNames(noticed), ", "), last.UTC().Format(time.RFC3339))
	} else {
		s.notices.set(u.key, nil)
	}
	s.state.Cache.Nominate(u.key.String(), nom)
	logger.Info("Preempting", "victims", candidateNames(evictNow), "underNotice", candidateNames(noticed), "victimPods", plan.VictimPods(),
		"terminating", len(plan.Terminating), "violatedPDBs", plan.ViolatedPDBs, "considered", plan.Considered)
	if len(plan.Victims) == 0 {
		return fmt.Sprintf("waiting for %d lower-priority pods already terminating", len(nom.Victims)), true
	}
	if len(evictNow) > 0 {
		now := *plan
		now.Victims = evictNow
		s.evict(ctx, u, prio, &now)
	}
	s.metrics.Preemptions.WithLabelValues(strconv.Itoa(int(prio))).Inc()
	s.metrics.PreemptionVictims.Observe(float64(plan.VictimPods()))
	return fmt.Sprintf("preempting %s; nominated for the freed capacity%s", plan.Describe(), noticeNote), true
}

// nominationCheck is a unit's nomination and its victims still left, as
// seen before the cycle's snapshot is taken (checkNomination).
type nominationCheck struct {
	nom  *snapshot.Nomination
	left []types.UID
}

// checkNomination looks at k's nomination before the cycle takes its
// snapshot. Victims only ever go, and the snapshot is built from the cache
// after this look: if none was left then, the snapshot holds none of what
// they held, so a unit that still does not fit needs another plan; if one
// was, the preemption is under way. Looked at after the snapshot, a victim
// that went in between would be gone from the look but not from the
// snapshot the unit did not fit in — and a second preemption would be
// planned on capacity the first is about to free.
func (s *Scheduler) checkNomination(k queue.Key) nominationCheck {
	nom := s.state.Cache.Nomination(k.String())
	if nom == nil {
		return nominationCheck{}
	}
	return nominationCheck{nom: nom, left: s.victimsLeft(nom)}
}

// preemptionInput is what a unit that does not fit may preempt — or, while
// its earlier preemption's victims are still going (nc), that one is under
// way. Victims that did not go by the deadline are planned around.
func (s *Scheduler) preemptionInput(ctx context.Context, u *unit, prio int32, nc nominationCheck) (*decide.Preemption, error) {
	var stuck sets.Set[types.UID]
	expired := false
	if nom := nc.nom; nom != nil {
		left := nc.left
		if len(left) > 0 && s.clock.Now().Before(nom.Deadline) {
			msg := fmt.Sprintf("preempted %d pods; waiting for %d of them to terminate and release what they hold", len(nom.Victims), len(left))
			if nom.Waiting != "" {
				msg = nom.Waiting
			}
			if note, ends, held := s.serveNotices(ctx, u, prio); note != "" {
				msg = note
				if held.HasAll(left...) {
					u.noticeEnds = ends
				}
			}
			return &decide.Preemption{InProgress: msg}, nil
		}
		expired = true // the executor drops it (Decision.DropNomination)
		if len(left) > 0 {
			stuck = sets.New(left...)
			klog.FromContext(ctx).Info("Preemption victims did not go in time; planning again without them", "stuck", len(left))
		}
	}
	if u != nil {
		if at, d := s.preemptionDelay(u); at.After(s.clock.Now()) {
			u.preemptAt = at
			return &decide.Preemption{Expired: expired, Delayed: fmt.Sprintf("preemption delayed until %s (preemption delay %s since its newest pending member was created)", at.UTC().Format(time.RFC3339), d)}, nil
		}
	}
	cands, err := s.candidates()
	if err != nil {
		return nil, err
	}
	pdbs, err := s.listers.pdbs.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return &decide.Preemption{Candidates: cands, PDBs: pdbs, Stuck: stuck, Expired: expired, Now: s.clock.Now(), ShortWait: s.opts.PreemptionShortWait}, nil
}

// nominatedNodes maps each pod of a unit's nomination to the node held for
// it (status.nominatedNodeName); empty without a nomination.
func (s *Scheduler) nominatedNodes(k queue.Key) map[types.UID]string {
	nom := s.state.Cache.Nomination(k.String())
	if nom == nil {
		return nil
	}
	out := make(map[types.UID]string, len(nom.Pods))
	for _, np := range nom.Pods {
		out[np.Pod.UID] = np.Node
	}
	return out
}

// victimsLeft are the victims still holding something, in the API
// server's view (the listers) or in the scheduler's own (the cache, which
// trails the listers): the pod exists, or a claim it held still holds its
// devices for it (snapshot.VictimHolds).
func (s *Scheduler) victimsLeft(nom *snapshot.Nomination) []types.UID {
	var out []types.UID
	for uid, v := range nom.Victims {
		if s.victimListed(uid, v) || s.state.Cache.StillHeld(uid, v) {
			out = append(out, uid)
		}
	}
	return out
}

// victimListed reports whether the listers still show victim uid or a
// claim holding devices for it.
func (s *Scheduler) victimListed(uid types.UID, v snapshot.Victim) bool {
	if p, err := s.listers.pods.Pods(v.Namespace).Get(v.Name); err == nil && p.UID == uid {
		return true
	}
	for _, name := range v.Claims {
		if c, err := s.listers.claims.ResourceClaims(v.Namespace).Get(name); err == nil && snapshot.VictimHolds(c, uid) {
			return true
		}
	}
	return false
}

// candidates are the running units, from the informer cache.
func (s *Scheduler) candidates() ([]preemption.Candidate, error) {
	pods, err := s.listers.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	cands := preemption.TreeCandidates(pods, func(ns, name string) (*lockv1.PodGroup, int32) {
		pg, err := s.podGroup(ns, name)
		if err != nil {
			return nil, 0
		}
		return pg, s.groupPriority(pg)
	}, func(ns, name string) *lockv1.CompositePodGroup { return s.compositeGetter(ns)(name) })
	preemption.Declare(cands, s.classTerms)
	return cands, nil
}

// preemptionDelay is when unit u may first preempt, and its delay: its
// PodGroup's or tree root's lockv1.PreemptionDelayAnnotation, else
// --preemption-delay for its pods' PriorityClass, counted from when its
// newest pending member was created (zero: no delay).
func (s *Scheduler) preemptionDelay(u *unit) (time.Time, time.Duration) {
	var ann map[string]string
	switch f := u.tree.Flat(); {
	case u.root != nil:
		ann = u.root.Annotations
	case f != nil && f.Group != nil:
		ann = f.Group.Annotations
	}
	var newest *corev1.Pod
	for _, g := range u.leaves() {
		for _, p := range g.Pending {
			if newest == nil || p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
				newest = p
			}
		}
	}
	if newest == nil {
		return time.Time{}, 0
	}
	d := podgroup.PreemptionDelayOf(ann, newest.Spec.PriorityClassName, s.opts.PreemptionDelay)
	if d <= 0 {
		return time.Time{}, 0
	}
	return newest.CreationTimestamp.Add(d), d
}

// classTerms are a candidate's terms by its pods' PriorityClass
// (--min-runtime, --preemption-notice); its group's annotations win
// (preemption.Declare).
func (s *Scheduler) classTerms(c preemption.Candidate) preemption.Terms {
	if len(c.Pods) == 0 {
		return preemption.Terms{}
	}
	class := c.Pods[0].Spec.PriorityClassName
	return preemption.Terms{MinRuntime: s.opts.MinRuntime[class], Notice: s.opts.PreemptionNotice[class]}
}

// evict marks every victim pod DisruptionTarget (PreemptionByScheduler),
// deletes it gracefully, and tells both sides with events.
func (s *Scheduler) evict(ctx context.Context, u *unit, prio int32, plan *preemption.Plan) {
	logger := klog.FromContext(ctx)
	preemptor := fmt.Sprintf("%s (priority %d)", u.name(), prio)
	pdbNote := ""
	if len(plan.ViolatedPDBs) > 0 {
		pdbNote = fmt.Sprintf("; PodDisruptionBudget %s violated: no other choice made room", strings.Join(plan.ViolatedPDBs, ", "))
	}
	byGroup := map[types.NamespacedName][]*corev1.Pod{}
	running := map[types.NamespacedName]int{}
	whole := map[types.NamespacedName]bool{}
	for _, v := range plan.Victims {
		if v.Group.Name == "" && v.Tree.Name == "" {
			continue
		}
		// A tree's victim spans groups: each records its own preemption.
		for _, p := range v.Pods {
			key := types.NamespacedName{Namespace: p.Namespace, Name: podgroup.GroupOf(p)}
			byGroup[key] = append(byGroup[key], p)
			whole[key] = v.Whole
			if _, ok := running[key]; !ok {
				running[key] = s.runningMembers(key)
			}
		}
	}
	// The victims' groups record the preemption first — a whole group's
	// incarnation ends here, with this reason, once — so nothing mistakes
	// the evictions below for lost members.
	groupMsg := map[types.NamespacedName]string{}
	for key, pods := range byGroup {
		pg, err := s.podGroup(key.Namespace, key.Name)
		if err != nil {
			continue
		}
		msg := fmt.Sprintf("%d of %d running pods preempted by %s%s", len(pods), running[key], preemptor, pdbNote)
		if len(pods) < running[key] {
			msg += fmt.Sprintf("; disruptionMode single: the group is now partially alive (%d pods still running)", running[key]-len(pods))
		}
		groupMsg[key] = msg
		s.recordPreemption(ctx, pg, whole[key] && !podgroup.Upstream(pg), metav1.Condition{Type: lockv1.DisruptionTarget, Status: metav1.ConditionTrue, Reason: lockv1.PodGroupReasonPreemption, Message: msg})
	}
	for _, v := range plan.Victims {
		for _, p := range v.Pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			msg := fmt.Sprintf("Preempted by %s to make room for its %d pods", preemptor, u.pending())
			if err := s.markDisruption(ctx, p, msg); err != nil {
				logger.Error(err, "Marking victim", "pod", klog.KObj(p))
			}
			if err := s.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil && !podReplaced(err) {
				logger.Error(err, "Deleting victim", "pod", klog.KObj(p))
			}
			s.recorder.Eventf(p, u.related(), corev1.EventTypeNormal, eventPreempted, "Preempting", "Preempted by %s on node %s", preemptor, p.Spec.NodeName)
		}
	}
	note := fmt.Sprintf("preempting %s to place %d pods%s", plan.Describe(), u.pending(), pdbNote)
	s.recorder.Eventf(u.object(), nil, corev1.EventTypeNormal, eventPreempting, "Preempting", "%s", note)
	for key, msg := range groupMsg {
		if pg, err := s.podGroup(key.Namespace, key.Name); err == nil {
			s.recorder.Eventf(pg, u.related(), corev1.EventTypeWarning, eventPreempted, "Preempting", "%s", msg)
		}
	}
}

// recordPreemption writes the victim group's DisruptionTarget condition
// and, for a group taken whole, ends its running incarnation with reason
// PreemptionByScheduler — in one write.
func (s *Scheduler) recordPreemption(ctx context.Context, pg *lockv1.PodGroup, endIncarnation bool, cond metav1.Condition) {
	now := metav1.NewTime(s.clock.Now())
	s.updateGroupStatus(ctx, pg, "preemption", func(cur *lockv1.PodGroup) bool {
		c := cond
		c.ObservedGeneration = cur.Generation
		meta.SetStatusCondition(&cur.Status.Conditions, c)
		clearNotice(cur, lockv1.PreemptionPendingReasonEvicted, "Evicted: "+cond.Message)
		if inc := cur.Status.Incarnation; endIncarnation && inc != nil && inc.Ended == nil {
			inc.Ended = &lockv1.PodGroupIncarnationEnd{Reason: lockv1.PodGroupReasonPreemption, Message: cond.Message, Time: now}
		}
		return true
	})
}

func (s *Scheduler) runningMembers(key types.NamespacedName) int {
	objs, err := s.listers.podIndex.ByIndex(groupIndex, key.Namespace+"/"+key.Name)
	if err != nil {
		return 0
	}
	n := 0
	for _, o := range objs {
		if p := o.(*corev1.Pod); podgroup.Active(p) && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// markDisruption sets DisruptionTarget=True (PreemptionByScheduler) on a
// pod, so a Job's podFailurePolicy can tell preemption from failure. A pod
// of the same name that took the victim's place is not marked: marked, it
// would count as going, and its gang would never hold it.
func (s *Scheduler) markDisruption(ctx context.Context, p *corev1.Pod, msg string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.UID != p.UID {
			return nil
		}
		podgroup.SetPodCondition(cur, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler, Message: msg, LastTransitionTime: metav1.NewTime(s.clock.Now())})
		_, err = s.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func candidateNames(cs []preemption.Candidate) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
