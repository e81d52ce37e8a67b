package scheduler

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// groupIndex indexes pods by "namespace/group" of the group they name.
const groupIndex = "lockstep-pod-group"

// unitKey is the queue key of the unit a pod is scheduled in.
func unitKey(pod *corev1.Pod) queue.Key {
	if g := podgroup.GroupOf(pod); g != "" {
		return queue.GroupKey(pod.Namespace, g)
	}
	return queue.PodKey(pod.Namespace, pod.Name)
}

func podGroupIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if g := podgroup.GroupOf(pod); g != "" {
		return []string{pod.Namespace + "/" + g}, nil
	}
	return nil, nil
}
