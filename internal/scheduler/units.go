package scheduler

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

const (
	groupKeyPrefix = "pg/"
	podKeyPrefix   = "pod/"
	groupIndex     = "lockstep-pod-group"
)

// unitKey is the queue key of the unit a pod is scheduled in.
func unitKey(pod *corev1.Pod) queue.Key {
	if g := podgroup.GroupOf(pod); g != "" {
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
	if g := podgroup.GroupOf(pod); g != "" {
		return []string{pod.Namespace + "/" + g}, nil
	}
	return nil, nil
}
