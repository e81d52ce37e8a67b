package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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

// unitKeys is unitKey for a loop over many pods: a group's key is read
// once, not converted from its PodGroup for each of its members (a gang of
// 10,000 pending members made each metrics scrape convert its PodGroup
// 10,000 times). The keys are the caches' as of each group's first pod.
func (s *Scheduler) unitKeys() func(*corev1.Pod) queue.Key {
	groups := map[types.NamespacedName]queue.Key{}
	return func(pod *corev1.Pod) queue.Key {
		g := podgroup.GroupOf(pod)
		if g == "" {
			return queue.PodKey(pod.Namespace, pod.Name)
		}
		name := types.NamespacedName{Namespace: pod.Namespace, Name: g}
		k, ok := groups[name]
		if !ok {
			k = s.groupKey(pod.Namespace, g)
			groups[name] = k
		}
		return k
	}
}
