package podgroup

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// An incarnation is one admission of a group (lockv1.PodGroupIncarnation).
// Its life, and who writes each step:
//
//	            scheduler binds the admitted members
//	(none/ended) ─────────────────────────────────► running ──┐ scheduler binds
//	      ▲                                           │  ▲     │ members added
//	      │ scheduler binds the next admission        │  └─────┘ by a resize
//	      │                                           │
//	      └──── ended (reason) ◄──────────────────────┘
//	              integrity controller: a lost member (MemberFailed, MemberLost,
//	              NodeLost, DeviceFailed, DeviceUnhealthy), Completed, OwnerStopped;
//	              scheduler: PreemptionByScheduler
//
// Only the current incarnation's members are judged, so members of an ended
// one that linger never count as losses of the next.

// WaitingSince is when a group waiting to be placed began to wait: when its
// last incarnation ended (a restart, a preemption), or, never admitted, when
// it was created.
func WaitingSince(pg *lockv1.PodGroup) metav1.Time {
	if inc := pg.Status.Incarnation; inc != nil && inc.Ended != nil {
		return inc.Ended.Time
	}
	return pg.CreationTimestamp
}

// Record returns the incarnation after the scheduler has bound the pods in
// bound, given every pod of the group as it sees them (bound ones included).
// When the current incarnation still has a live member, the new members join
// it (a resize step); otherwise they start the next incarnation. Members
// bound earlier but not recorded (a crash between binding and this write)
// are recorded too.
func Record(cur *lockv1.PodGroupIncarnation, minCount int32, pods, bound []*corev1.Pod, now metav1.Time) *lockv1.PodGroupIncarnation {
	byUID := make(map[types.UID]*corev1.Pod, len(pods))
	for _, p := range pods {
		byUID[p.UID] = p
	}
	if cur == nil {
		cur = &lockv1.PodGroupIncarnation{}
	}
	var next *lockv1.PodGroupIncarnation
	if HasLiveMember(cur, byUID) {
		next = cur.DeepCopy()
	} else {
		next = &lockv1.PodGroupIncarnation{Number: cur.Number + 1, MinCount: minCount, BoundTime: now}
	}
	next.LastBoundTime = now
	next.MinCount = minCount
	recorded := map[types.UID]bool{}
	old := map[types.UID]bool{}
	for _, m := range cur.Members {
		old[m.UID] = true
	}
	for _, m := range next.Members {
		recorded[m.UID] = true
	}
	add := func(p *corev1.Pod) {
		if recorded[p.UID] {
			return
		}
		recorded[p.UID] = true
		next.Members = append(next.Members, lockv1.PodGroupMember{Name: p.Name, UID: p.UID, Index: MemberIndex(p)})
	}
	for _, p := range bound {
		add(p)
	}
	for _, p := range pods {
		if Ours(p) && Active(p) && !Going(p) && !old[p.UID] {
			add(p)
		}
	}
	if next.Number != numberOf(cur) {
		// A new incarnation starts with the ranks already done: they
		// counted toward its minCount when it was admitted.
		for _, m := range cur.Members {
			if m.Outcome == lockv1.MemberSucceeded && !recorded[m.UID] {
				recorded[m.UID] = true
				next.Members = append(next.Members, m)
			}
		}
		for _, p := range pods {
			if Ours(p) && Succeeded(p) && !recorded[p.UID] {
				recorded[p.UID] = true
				next.Members = append(next.Members, lockv1.PodGroupMember{Name: p.Name, UID: p.UID, Index: MemberIndex(p), Outcome: lockv1.MemberSucceeded})
			}
		}
	}
	return next
}

func numberOf(inc *lockv1.PodGroupIncarnation) int32 {
	if inc == nil {
		return 0
	}
	return inc.Number
}

// HasLiveMember reports whether an incarnation runs: it has not ended and
// one of its members without an outcome is bound and staying.
func HasLiveMember(inc *lockv1.PodGroupIncarnation, pods map[types.UID]*corev1.Pod) bool {
	if inc == nil || inc.Ended != nil {
		return false
	}
	for _, m := range inc.Members {
		if m.Outcome != "" {
			continue
		}
		if p := pods[m.UID]; p != nil && Active(p) && !Going(p) {
			return true
		}
	}
	return false
}

// Unrecorded counts the group's bound, staying Lockstep pods that the
// current incarnation does not list: binding them is not finished (or its
// record was lost in a crash).
func Unrecorded(inc *lockv1.PodGroupIncarnation, pods []*corev1.Pod) int {
	listed := map[types.UID]bool{}
	if inc != nil {
		for _, m := range inc.Members {
			listed[m.UID] = true
		}
	}
	n := 0
	for _, p := range pods {
		if Ours(p) && Active(p) && !Going(p) && !listed[p.UID] {
			n++
		}
	}
	return n
}
