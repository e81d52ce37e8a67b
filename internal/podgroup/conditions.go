package podgroup

import (
	corev1 "k8s.io/api/core/v1"
)

// SetPodCondition sets a pod condition, replacing one of the same type.
func SetPodCondition(p *corev1.Pod, c corev1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c.Type {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

// PodCondition returns the pod's condition of type typ, or nil.
func PodCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// HasDisruption reports whether the pod carries DisruptionTarget=True with
// the given reason (e.g. PreemptionByScheduler); "" matches any reason.
func HasDisruption(p *corev1.Pod, reason string) bool {
	c := Disruption(p)
	return c != nil && (reason == "" || c.Reason == reason)
}

// Disruption returns the pod's DisruptionTarget=True condition, or nil.
func Disruption(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}
