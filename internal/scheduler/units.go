package scheduler

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

const (
	groupKeyPrefix = "pg/"
	podKeyPrefix   = "pod/"
	groupIndex     = "lockstep-pod-group"
)

// GroupOf returns the PodGroup a pod belongs to: the Lockstep label, else
// spec.schedulingGroup.podGroupName where the API server serves it.
func GroupOf(pod *corev1.Pod) string {
	if g := pod.Labels[lockv1.PodGroupLabel]; g != "" {
		return g
	}
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return *sg.PodGroupName
	}
	return ""
}

// unitKey is the queue key of the unit a pod is scheduled in.
func unitKey(pod *corev1.Pod) queue.Key {
	if g := GroupOf(pod); g != "" {
		return queue.Key(groupKeyPrefix + pod.Namespace + "/" + g)
	}
	return queue.Key(podKeyPrefix + pod.Namespace + "/" + pod.Name)
}

func groupKey(ns, name string) queue.Key { return queue.Key(groupKeyPrefix + ns + "/" + name) }

// parseKey splits a key into kind ("pg" or "pod"), namespace and name.
func parseKey(k queue.Key) (kind, ns, name string, err error) {
	parts := strings.SplitN(string(k), "/", 3)
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("malformed unit key %q", k)
	}
	return parts[0], parts[1], parts[2], nil
}

func podGroupIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if g := GroupOf(pod); g != "" {
		return []string{pod.Namespace + "/" + g}, nil
	}
	return nil, nil
}

// Ours reports whether Lockstep schedules the pod.
func Ours(pod *corev1.Pod) bool { return pod.Spec.SchedulerName == lockv1.SchedulerName }

// Pending reports whether a pod waits for a node.
func Pending(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// Active reports whether a bound pod still holds its node.
func Active(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}
