package scheduler

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// groupPriorities remembers each group's priority (podgroup.Priority: its
// lowest Lockstep member's) between pod events. The queue orders a unit
// each time one of its pods changes; reading it from the pod cache each
// time read all of a gang's members per member — 10,000 members created
// one by one read 50 million pods on the informer's goroutine, and their
// events queued behind it.
//
// A pod's priority never changes (the API server refuses it), so a
// group's changes only when a member joins or leaves. What is remembered
// is the lowest priority and how many members have it:
//   - a member that joins below it lowers it; at it, is counted;
//   - a member that leaves at it is uncounted; when none is left, the
//     group is forgotten and read again from the cache when next asked.
//
// The pod handlers tell it before they queue the unit, so the order a
// pod's event gives its unit counts the pod. Joins are told once per
// member: its add, or the update that moved it into the group.
type groupPriorities struct {
	mu     sync.Mutex
	groups map[types.NamespacedName]groupPriority
	// changes counts the joins and leaves told: a priority read from the
	// cache while one happened may have missed it, and is not kept.
	changes uint64
}

type groupPriority struct {
	prio int32
	// lowest counts the members at prio; 0: no Lockstep member yet.
	lowest int
}

// get is group's priority, read from members (the pod cache) when not
// remembered.
func (g *groupPriorities) get(group types.NamespacedName, members func() []*corev1.Pod) int32 {
	g.mu.Lock()
	p, known := g.groups[group]
	before := g.changes
	g.mu.Unlock()
	if known {
		return p.prio
	}
	// Read outside the lock (it reads every member). A member that joined
	// or left meanwhile may be missing from what it read, or still in it:
	// then the answer stands for this call only.
	p = lowestPriority(members())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changes == before {
		if g.groups == nil {
			g.groups = map[types.NamespacedName]groupPriority{}
		}
		g.groups[group] = p
	}
	return p.prio
}

// lowestPriority is podgroup.Priority with how many members have it.
func lowestPriority(members []*corev1.Pod) groupPriority {
	var p groupPriority
	p.prio, _ = podgroup.Priority(members)
	for _, m := range members {
		if podgroup.Ours(m) && corev1helpers.PodPriority(m) == p.prio {
			p.lowest++
		}
	}
	return p
}

// joined counts pod as a new member of its group: added, or updated into
// it.
func (g *groupPriorities) joined(pod *corev1.Pod) {
	g.change(pod, podgroup.GroupOf(pod), func(group types.NamespacedName, cur groupPriority, known bool, v int32) {
		switch {
		case !known:
		case cur.lowest == 0 || v < cur.prio:
			g.groups[group] = groupPriority{prio: v, lowest: 1}
		case v == cur.prio:
			cur.lowest++
			g.groups[group] = cur
		}
	})
}

// left uncounts pod from group: deleted, or updated out of it.
func (g *groupPriorities) left(pod *corev1.Pod, group string) {
	g.change(pod, group, func(key types.NamespacedName, cur groupPriority, known bool, v int32) {
		switch {
		case !known || v > cur.prio:
		case v == cur.prio && cur.lowest > 1:
			cur.lowest--
			g.groups[key] = cur
		default:
			// The last at the lowest (or a member never counted): read again.
			delete(g.groups, key)
		}
	})
}

// change counts a join or leave of pod (of priority v) in group, for a
// Lockstep pod, and applies it under the lock to what is remembered of
// the group (cur, when known).
func (g *groupPriorities) change(pod *corev1.Pod, group string, apply func(key types.NamespacedName, cur groupPriority, known bool, v int32)) {
	if group == "" || !podgroup.Ours(pod) {
		return
	}
	v := corev1helpers.PodPriority(pod)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.changes++
	key := types.NamespacedName{Namespace: pod.Namespace, Name: group}
	cur, known := g.groups[key]
	apply(key, cur, known, v)
}
