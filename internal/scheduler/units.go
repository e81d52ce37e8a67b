package scheduler

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// groupIndex indexes pods by "namespace/group" of the group they name.
const groupIndex = "lockstep-pod-group"

// unitKey is the queue key of the unit a pod is scheduled in: its tree's
// root for a group that hangs in a tree, its group, or the pod alone.
func (s *Scheduler) unitKey(pod *corev1.Pod) queue.Key {
	if g := podgroup.GroupOf(pod); g != "" {
		return s.groupKey(pod.Namespace, g)
	}
	return queue.PodKey(pod.Namespace, pod.Name)
}

// groupKey is the queue key of group ns/name: its tree's root when it
// hangs under one that exists (a group of a tree is never placed alone),
// else the group's own — also while its tree has no root, which its cycle
// then says. It reads the caches only.
func (s *Scheduler) groupKey(ns, name string) queue.Key {
	if pg, err := s.podGroup(ns, name); err == nil {
		if parent := podgroup.ParentOf(pg); parent != "" {
			if root, _, _ := podgroup.RootOf(parent, s.compositeGetter(ns)); root != nil {
				return queue.TreeKey(ns, root.Name)
			}
		}
	}
	return queue.GroupKey(ns, name)
}
