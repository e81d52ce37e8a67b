package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// staticFilter checks what does not change within a cycle: schedulability,
// node name, node selector and required affinity, taints. It returns "" when
// the node passes, else the reason.
func staticFilter(logger klog.Logger, pod *corev1.Pod, aff nodeaffinity.RequiredNodeAffinity, node *corev1.Node) (string, error) {
	if node.Spec.Unschedulable && !toleratesUnschedulable(logger, pod) {
		return ReasonUnschedulable, nil
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return ReasonNodeName, nil
	}
	ok, err := aff.Match(node)
	if err != nil {
		return "", fmt.Errorf("pod %s: invalid node affinity: %w", klog.KObj(pod), err)
	}
	if !ok {
		return ReasonAffinity, nil
	}
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	if untolerated {
		return fmt.Sprintf("%s{%s: %s}", reasonTaintPrefix, taint.Key, taint.Value), nil
	}
	return "", nil
}

func toleratesUnschedulable(logger klog.Logger, pod *corev1.Pod) bool {
	t := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	return corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, &t, true)
}

// fitsResources checks requests and host ports against what is left on the
// node; it returns "" or the first reason.
func fitsResources(ni *snapshot.NodeInfo, req snapshot.Resources, ports []string) string {
	if missing := snapshot.Insufficient(ni.Allocatable, ni.Requested, req); len(missing) > 0 {
		return fmt.Sprintf(reasonInsufficientFmt, missing[0])
	}
	for _, p := range ports {
		if ni.PortConflict(p) {
			return ReasonPorts
		}
	}
	return ""
}
