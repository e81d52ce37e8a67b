package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// Event reasons of graceful preemption.
const (
	eventPreemptionPending   = "PreemptionPending"
	eventPreemptionWithdrawn = "PreemptionWithdrawn"
)

// noticePoll is the longest a preemptor whose victims are under notice
// waits between looks: their acknowledgements wake it sooner
// (onPodUpdate, onPodGroup), the notice's end at the latest.
const noticePoll = 30 * time.Second

// A notice is a victim given time to checkpoint before a preemptor
// evicts it (lockv1.PreemptionNoticeAnnotation): the preemptor's
// nomination holds what it will free meanwhile, and the victim is evicted
// whole when it acknowledges (lockv1.CheckpointedAtAnnotation later than
// the notice) or at the deadline, whichever comes first. Its life:
//
//	victim chosen ──► giveNotice (PreemptionPending on the group and its
//	                  │ pods, the deadline annotation, an event)
//	                  ├─ acknowledged or deadline ──► evict whole
//	                  └─ the preemptor binds without it, goes, or plans
//	                     again ──► withdraw (PreemptionPending False)
//
// The notice lives in the victims' pods (the deadline annotation), so a
// restarted scheduler that chooses them again keeps their deadline; one
// no preemptor holds any more is withdrawn by the sweep.
type notice struct {
	victim   preemption.Candidate
	deadline time.Time
}

// notices are the notices each preemptor (by unit key) holds.
type notices struct {
	mu     sync.Mutex
	byUnit map[queue.Key][]notice
	// holders are, per victim pod and victim group, the units holding a
	// notice for it: what an acknowledgement wakes.
	byPod   map[types.UID]sets.Set[queue.Key]
	byGroup map[types.NamespacedName]sets.Set[queue.Key]
}

func (n *notices) init() {
	if n.byUnit == nil {
		n.byUnit = map[queue.Key][]notice{}
		n.byPod = map[types.UID]sets.Set[queue.Key]{}
		n.byGroup = map[types.NamespacedName]sets.Set[queue.Key]{}
	}
}

// set replaces what k holds.
func (n *notices) set(k queue.Key, ns []notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.init()
	n.dropLocked(k)
	if len(ns) == 0 {
		return
	}
	n.byUnit[k] = ns
	for _, no := range ns {
		for _, p := range no.victim.Pods {
			addHolder(n.byPod, p.UID, k)
			addHolder(n.byGroup, types.NamespacedName{Namespace: p.Namespace, Name: podgroup.GroupOf(p)}, k)
		}
	}
}

func addHolder[K comparable](m map[K]sets.Set[queue.Key], key K, k queue.Key) {
	if m[key] == nil {
		m[key] = sets.New[queue.Key]()
	}
	m[key].Insert(k)
}

func (n *notices) dropLocked(k queue.Key) {
	for _, no := range n.byUnit[k] {
		for _, p := range no.victim.Pods {
			if h := n.byPod[p.UID]; h != nil {
				if h.Delete(k); h.Len() == 0 {
					delete(n.byPod, p.UID)
				}
			}
			g := types.NamespacedName{Namespace: p.Namespace, Name: podgroup.GroupOf(p)}
			if h := n.byGroup[g]; h != nil {
				if h.Delete(k); h.Len() == 0 {
					delete(n.byGroup, g)
				}
			}
		}
	}
	delete(n.byUnit, k)
}

// of is what k holds.
func (n *notices) of(k queue.Key) []notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byUnit[k]
}

// take removes and returns what k holds.
func (n *notices) take(k queue.Key) []notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.init()
	out := n.byUnit[k]
	n.dropLocked(k)
	return out
}

// holders are the units holding a notice for pod uid (or, when the
// pod's group is named, for its group).
func (n *notices) holders(uid types.UID, group types.NamespacedName) []queue.Key {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := sets.New[queue.Key]()
	if h := n.byPod[uid]; h != nil {
		out = out.Union(h)
	}
	if h := n.byGroup[group]; group.Name != "" && h != nil {
		out = out.Union(h)
	}
	return out.UnsortedList()
}

// clearNotice sets a group's PreemptionPending False (reason, msg) when
// it is True, and reports whether it did.
func clearNotice(pg *lockv1.PodGroup, reason, msg string) bool {
	if !meta.IsStatusConditionTrue(pg.Status.Conditions, lockv1.PreemptionPending) {
		return false
	}
	return meta.SetStatusCondition(&pg.Status.Conditions, metav1.Condition{Type: lockv1.PreemptionPending, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: pg.Generation})
}

// splitByNotice separates the victims to evict now — those that asked
// for no notice, and those whose notice is over — from those to give (or
// keep giving) notice.
func splitByNotice(victims []preemption.Candidate, now time.Time) (evictNow, noticed []preemption.Candidate) {
	for _, v := range victims {
		if v.Notice <= 0 || v.NoticeOver(now) {
			evictNow = append(evictNow, v)
		} else {
			noticed = append(noticed, v)
		}
	}
	return evictNow, noticed
}

// giveNotice marks each victim under notice for u — its groups' and
// pods' PreemptionPending condition, its pods' deadline annotation, an
// event — keeping the deadline of a notice it already has, and records
// the notices u holds. It returns the latest deadline.
func (s *Scheduler) giveNotice(ctx context.Context, u *unit, prio int32, victims []preemption.Candidate, now time.Time) time.Time {
	preemptor := fmt.Sprintf("%s (priority %d)", u.name(), prio)
	var held []notice
	var last time.Time
	for _, v := range victims {
		deadline := v.NoticeDeadline
		if deadline.IsZero() {
			deadline = now.Add(v.Notice).Truncate(time.Second)
		}
		if deadline.After(last) {
			last = deadline
		}
		held = append(held, notice{victim: v, deadline: deadline})
		msg := fmt.Sprintf("Preempted by %s: checkpoint and set %s by %s; the group is evicted whole then, or as soon as it has",
			preemptor, lockv1.CheckpointedAtAnnotation, deadline.UTC().Format(time.RFC3339))
		s.markNotice(ctx, v, deadline, msg)
	}
	s.notices.set(u.key, held)
	return last
}

// markNotice writes a victim's notice, skipping what is already written
// (a notice kept across plans or a restart).
func (s *Scheduler) markNotice(ctx context.Context, v preemption.Candidate, deadline time.Time, msg string) {
	logger := klog.FromContext(ctx)
	value := deadline.UTC().Format(time.RFC3339)
	cond := metav1.Condition{Type: lockv1.PreemptionPending, Status: metav1.ConditionTrue, Reason: lockv1.PreemptionPendingReasonNotice, Message: msg}
	for _, key := range victimGroups(v) {
		pg, err := s.podGroup(key.Namespace, key.Name)
		if err != nil || pg == nil || meta.IsStatusConditionTrue(pg.Status.Conditions, lockv1.PreemptionPending) {
			continue
		}
		s.updateGroupStatus(ctx, pg, "preemption notice", func(cur *lockv1.PodGroup) bool {
			c := cond
			c.ObservedGeneration = cur.Generation
			return meta.SetStatusCondition(&cur.Status.Conditions, c)
		})
		s.recorder.Eventf(pg, nil, corev1.EventTypeWarning, eventPreemptionPending, "Preempting", "%s", msg)
	}
	for _, p := range v.Pods {
		if p.Annotations[lockv1.PreemptionPendingAnnotation] == value {
			continue
		}
		if err := s.patchNotice(ctx, p, &value, corev1.ConditionTrue, lockv1.PreemptionPendingReasonNotice, msg); err != nil {
			logger.Error(err, "Giving preemption notice", "pod", klog.KObj(p))
		}
		if v.Group.Name == "" && v.Tree.Name == "" {
			s.recorder.Eventf(p, nil, corev1.EventTypeWarning, eventPreemptionPending, "Preempting", "%s", msg)
		}
	}
}

// patchNotice sets (value non-nil) or removes a pod's deadline
// annotation, and its PreemptionPending condition: two patches, once per
// notice, never per cycle. Both name the pod's uid, so neither lands on a
// pod of the same name that took its place.
func (s *Scheduler) patchNotice(ctx context.Context, p *corev1.Pod, value *string, status corev1.ConditionStatus, reason, msg string) error {
	ann, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": p.UID, "annotations": map[string]any{lockv1.PreemptionPendingAnnotation: value}}})
	if err != nil {
		return err
	}
	if _, err := s.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, ann, metav1.PatchOptions{}); err != nil {
		return ignoreReplaced(err)
	}
	cond, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": p.UID},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: lockv1.PreemptionPending, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(s.clock.Now()),
		}}},
	})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, cond, metav1.PatchOptions{}, "status")
	return ignoreReplaced(err)
}

// victimGroups are the PodGroups a victim's pods belong to (a tree's
// span several; a lone pod's none).
func victimGroups(v preemption.Candidate) []types.NamespacedName {
	if v.Group.Name == "" && v.Tree.Name == "" {
		return nil
	}
	seen := sets.New[types.NamespacedName]()
	var out []types.NamespacedName
	for _, p := range v.Pods {
		k := types.NamespacedName{Namespace: p.Namespace, Name: podgroup.GroupOf(p)}
		if k.Name != "" && !seen.Has(k) {
			seen.Insert(k)
			out = append(out, k)
		}
	}
	return out
}

// serveNotices looks, from the informer caches, at the victims u gave
// notice: one that acknowledged, lost a member (it restarts anyway), or
// whose deadline passed is evicted whole now. It returns a note on the
// notices still running, when the first ends and their pods (none: none
// runs).
func (s *Scheduler) serveNotices(ctx context.Context, u *unit, prio int32) (string, time.Time, sets.Set[types.UID]) {
	held := s.notices.of(u.key)
	if len(held) == 0 {
		return "", time.Time{}, nil
	}
	now := s.clock.Now()
	var keep []notice
	var evict []preemption.Candidate
	for _, n := range held {
		v, whole := s.refreshVictim(n.victim)
		switch {
		case len(v.Pods) == 0:
			// Gone already.
		case !whole || v.NoticeOver(now) || !now.Before(n.deadline):
			evict = append(evict, v)
		default:
			n.victim = v
			keep = append(keep, n)
		}
	}
	if len(evict) > 0 {
		klog.FromContext(ctx).Info("Preemption notice over; evicting", "victims", candidateNames(evict))
		s.evict(ctx, u, prio, &preemption.Plan{Victims: evict})
	}
	s.notices.set(u.key, keep)
	if len(keep) == 0 {
		return "", time.Time{}, nil
	}
	sort.Slice(keep, func(i, j int) bool { return keep[i].deadline.Before(keep[j].deadline) })
	var names []string
	pods := sets.New[types.UID]()
	for _, n := range keep {
		names = append(names, n.victim.Name)
		for _, p := range n.victim.Pods {
			pods.Insert(p.UID)
		}
	}
	return fmt.Sprintf("%s under preemption notice until %s: evicted whole then, or once it sets %s",
		strings.Join(names, ", "), keep[len(keep)-1].deadline.UTC().Format(time.RFC3339), lockv1.CheckpointedAtAnnotation), keep[0].deadline, pods
}

// refreshVictim is a victim as the informer caches show it now: its pods
// still running, its group's annotations, its terms (Declare); whole is
// false when a pod it had is gone or has ended.
func (s *Scheduler) refreshVictim(v preemption.Candidate) (preemption.Candidate, bool) {
	deadline := time.Time{}
	for _, p := range v.Pods {
		if d := podgroup.TimeAnnotation(p.Annotations, lockv1.PreemptionPendingAnnotation); !d.IsZero() {
			deadline = d
		}
	}
	out := v
	out.Pods = nil
	whole := true
	for _, p := range v.Pods {
		cur, err := s.listers.pods.Pods(p.Namespace).Get(p.Name)
		if err != nil || cur.UID != p.UID || !podgroup.Active(cur) || cur.DeletionTimestamp != nil {
			whole = false
			continue
		}
		out.Pods = append(out.Pods, cur)
	}
	switch {
	case v.Tree.Name != "":
		if cpg := s.compositeGetter(v.Tree.Namespace)(v.Tree.Name); cpg != nil {
			out.Annotations = cpg.Annotations
		}
	case v.Group.Name != "":
		if pg, err := s.podGroup(v.Group.Namespace, v.Group.Name); err == nil && pg != nil {
			out.Annotations = pg.Annotations
		}
	}
	cs := []preemption.Candidate{out}
	preemption.Declare(cs, s.classTerms)
	out = cs[0]
	if out.NoticeDeadline.IsZero() {
		// The cache has not seen the annotation written yet.
		out.NoticeDeadline = deadline
	}
	out.Notice = v.Notice
	return out, whole
}

// wakeNoticeHolders queues the preemptors holding a notice for a pod or
// group whose checkpoint annotation changed: the acknowledgement ends the
// notice.
func (s *Scheduler) wakeNoticeHolders(uid types.UID, group types.NamespacedName) {
	for _, k := range s.notices.holders(uid, group) {
		s.queue.Add(k)
	}
}

// dropNomination ends unit k's nomination and withdraws the notices it
// holds.
func (s *Scheduler) dropNomination(ctx context.Context, k queue.Key) {
	s.state.Cache.DropNomination(k.String())
	s.withdrawNotices(ctx, k, "the preemptor no longer needs it (it was placed without it, or is gone)")
}

// withdrawNotices ends the notices unit k holds (it bound without them,
// went, or plans again): their victims are no longer to be evicted for
// it.
func (s *Scheduler) withdrawNotices(ctx context.Context, k queue.Key, why string) {
	for _, n := range s.notices.take(k) {
		s.withdraw(ctx, n.victim.Pods, victimGroups(n.victim), why)
	}
}

// withdraw clears a notice from pods (unless another preemptor holds one
// for them) and groups.
func (s *Scheduler) withdraw(ctx context.Context, pods []*corev1.Pod, groups []types.NamespacedName, why string) {
	logger := klog.FromContext(ctx)
	msg := "Preemption notice withdrawn: " + why
	for _, p := range pods {
		if len(s.notices.holders(p.UID, types.NamespacedName{})) > 0 {
			continue
		}
		cur, err := s.listers.pods.Pods(p.Namespace).Get(p.Name)
		if err != nil || cur.UID != p.UID || cur.DeletionTimestamp != nil {
			continue
		}
		if err := s.patchNotice(ctx, cur, nil, corev1.ConditionFalse, lockv1.PreemptionPendingReasonWithdrawn, msg); err != nil {
			logger.Error(err, "Withdrawing preemption notice", "pod", klog.KObj(p))
		}
	}
	for _, key := range groups {
		pg, err := s.podGroup(key.Namespace, key.Name)
		if err != nil || pg == nil || !meta.IsStatusConditionTrue(pg.Status.Conditions, lockv1.PreemptionPending) {
			continue
		}
		s.updateGroupStatus(ctx, pg, "preemption notice withdrawn", func(cur *lockv1.PodGroup) bool {
			return clearNotice(cur, lockv1.PreemptionPendingReasonWithdrawn, msg)
		})
		s.recorder.Eventf(pg, nil, corev1.EventTypeNormal, eventPreemptionWithdrawn, "Preempting", "%s", msg)
	}
}

// sweepNotices withdraws, every sweepInterval, the notices no preemptor
// holds past their deadline and nominationSlack (a scheduler restarted
// while they ran, and no preemptor chose them again).
func (s *Scheduler) sweepNotices(ctx context.Context) {
	wait.UntilWithContext(ctx, s.sweepNoticesOnce, sweepInterval)
}

func (s *Scheduler) sweepNoticesOnce(ctx context.Context) {
	pods, err := s.listers.pods.List(labels.Everything())
	if err != nil {
		return
	}
	now := s.clock.Now()
	var stale []*corev1.Pod
	groups := sets.New[types.NamespacedName]()
	for _, p := range pods {
		d := podgroup.TimeAnnotation(p.Annotations, lockv1.PreemptionPendingAnnotation)
		if d.IsZero() || p.DeletionTimestamp != nil || now.Before(d.Add(nominationSlack)) || len(s.notices.holders(p.UID, types.NamespacedName{})) > 0 {
			continue
		}
		stale = append(stale, p)
		if g := podgroup.GroupOf(p); g != "" {
			groups.Insert(types.NamespacedName{Namespace: p.Namespace, Name: g})
		}
	}
	if len(stale) > 0 {
		klog.FromContext(ctx).Info("Withdrawing preemption notices no preemptor holds", "pods", len(stale))
		s.withdraw(ctx, stale, groups.UnsortedList(), "no preemptor holds it any more")
	}
}
