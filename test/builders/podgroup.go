package builders

import (
	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// GangPodGroup is a Lockstep PodGroup with gang minCount.
func GangPodGroup(ns, name string, minCount int32) *lockv1.PodGroup {
	return &lockv1.PodGroup{
		ObjectMeta: Meta(ns, name),
		Spec: lockv1.PodGroupSpec{
			SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: minCount}},
		},
	}
}

// Member makes the pod a Lockstep-scheduled member of a PodGroup.
func (w *PodWrapper) Member(group string) *PodWrapper {
	return w.Scheduler(lockv1.SchedulerName).Label(lockv1.PodGroupLabel, group)
}
