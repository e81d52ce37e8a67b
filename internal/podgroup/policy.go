package podgroup

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// IsGang reports whether the group is placed all or nothing.
func IsGang(pg *lockv1.PodGroup) bool {
	return pg != nil && pg.Spec.SchedulingPolicy.Gang != nil
}

// MinCount is a gang's minCount; a basic group (or none) needs 1.
func MinCount(pg *lockv1.PodGroup) int {
	if IsGang(pg) {
		return int(pg.Spec.SchedulingPolicy.Gang.MinCount)
	}
	return 1
}

// DisruptAll reports whether the group is disrupted whole: disruptionMode
// all, Lockstep's default (upstream defaults to single).
func DisruptAll(pg *lockv1.PodGroup) bool {
	return pg != nil && (pg.Spec.DisruptionMode == nil || pg.Spec.DisruptionMode.Single == nil)
}

// TopologyKeys are the node labels a group must stay within one value of
// (spec.schedulingConstraints.topology).
func TopologyKeys(pg *lockv1.PodGroup) []string {
	if pg == nil || pg.Spec.SchedulingConstraints == nil {
		return nil
	}
	var keys []string
	for _, t := range pg.Spec.SchedulingConstraints.Topology {
		keys = append(keys, t.Key)
	}
	return keys
}

// PreferredTopology are the node labels, narrowest first, a group would
// rather stay within one value of (lockv1.PreferredTopologyAnnotation).
func PreferredTopology(pg *lockv1.PodGroup) []string {
	if pg == nil {
		return nil
	}
	return splitList(pg.Annotations[lockv1.PreferredTopologyAnnotation])
}

// DeviceTopology is the device attribute a group's devices must share
// one value of ("" for none; lockv1.DeviceTopologyAnnotation).
func DeviceTopology(pg *lockv1.PodGroup) string {
	if pg == nil {
		return ""
	}
	return strings.TrimSpace(pg.Annotations[lockv1.DeviceTopologyAnnotation])
}

// splitList reads "a, b" as [a b], dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// Priority is a group's effective priority: its members'. The API server's
// Priority admission and ResourceQuota scopes govern a pod's priority, so a
// group's priority can never exceed what its members were admitted with —
// a PodGroup's own priorityClassName or priority only has to agree with
// them (the webhook refuses members that do not), and is not trusted here.
// Members normally share one priority; if they differ the lowest counts.
// ok is false when the group has no Lockstep member yet.
func Priority(members []*corev1.Pod) (prio int32, ok bool) {
	for _, p := range members {
		if !Ours(p) {
			continue
		}
		v := corev1helpers.PodPriority(p)
		if !ok || v < prio {
			prio, ok = v, true
		}
	}
	return prio, ok
}
