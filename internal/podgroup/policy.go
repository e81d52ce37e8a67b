package podgroup

import (
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

// TopologyKeys are the node labels a group must stay within one value of.
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

// Priority is spec.priority, else the value of spec.priorityClassName as
// classValue resolves it, else 0.
func Priority(pg *lockv1.PodGroup, classValue func(name string) (int32, bool)) int32 {
	if pg.Spec.Priority != nil {
		return *pg.Spec.Priority
	}
	if pg.Spec.PriorityClassName != "" && classValue != nil {
		if v, ok := classValue(pg.Spec.PriorityClassName); ok {
			return v
		}
	}
	return 0
}
