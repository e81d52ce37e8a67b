package cycle

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// UnitOf names the unit a pod is scheduled in and gives the unit's
// priority (the scheduler's queue key and order).
type UnitOf func(*corev1.Pod) (key string, priority int32)

// RestoreNominations rebuilds, into c, the nominations that pods record
// in status.nominatedNodeName: every pending Lockstep pod the scheduler
// nominated, grouped by unit, held until deadline. A unit that already
// holds a nomination in c keeps it. This is how a restarted scheduler
// keeps the capacity its predecessor's preemptions freed for their
// preemptors, and how explain sees the nominations the scheduler holds.
func RestoreNominations(c *snapshot.Cache, pods []*corev1.Pod, unitOf UnitOf, deadline time.Time) int {
	byUnit := map[string]*snapshot.Nomination{}
	for _, p := range pods {
		if !podgroup.Ours(p) || !podgroup.Pending(p) || p.Status.NominatedNodeName == "" {
			continue
		}
		key, prio := unitOf(p)
		n := byUnit[key]
		if n == nil {
			n = &snapshot.Nomination{Priority: prio, Deadline: deadline, Restored: true}
			byUnit[key] = n
		}
		n.Pods = append(n.Pods, snapshot.NominatedPod{Pod: p, Node: p.Status.NominatedNodeName})
	}
	keys := make([]string, 0, len(byUnit))
	for k := range byUnit {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	restored := 0
	for _, k := range keys {
		if c.Nomination(k) != nil {
			continue
		}
		n := byUnit[k]
		sort.Slice(n.Pods, func(i, j int) bool { return n.Pods[i].Pod.Name < n.Pods[j].Pod.Name })
		c.Nominate(k, n)
		restored++
	}
	return restored
}
