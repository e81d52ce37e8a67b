package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeSchedulingChanged(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
		},
	}
	tests := []struct {
		name   string
		change func(*corev1.Node)
		want   bool
	}{
		{name: "heartbeat", change: func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Minute))
			n.ResourceVersion = "2"
		}, want: false},
		{name: "images", change: func(n *corev1.Node) { n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}} }, want: false},
		{name: "not ready", change: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, want: true},
		{name: "label", change: func(n *corev1.Node) { n.Labels["zone"] = "b" }, want: true},
		{name: "taint", change: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}} }, want: true},
		{name: "cordon", change: func(n *corev1.Node) { n.Spec.Unschedulable = true }, want: true},
		{name: "allocatable", change: func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("4") }, want: true},
		{name: "declared features", change: func(n *corev1.Node) { n.Status.DeclaredFeatures = []string{"F"} }, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.change(n)
			if got := nodeSchedulingChanged(base, n); got != tc.want {
				t.Errorf("nodeSchedulingChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOnlyConditionsChanged(t *testing.T) {
	base := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "1", Labels: map[string]string{"g": "a"}},
		Spec:       corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue"}}},
	}
	claim := "p-gpu"
	tests := []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{name: "the scheduler's own condition", change: func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
			p.ResourceVersion = "2"
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "lockstep"}}
		}, want: true},
		{name: "gate removed", change: func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }, want: false},
		{name: "label", change: func(p *corev1.Pod) { p.Labels["g"] = "b" }, want: false},
		{name: "claim generated", change: func(p *corev1.Pod) {
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
		}, want: false},
		{name: "nominated", change: func(p *corev1.Pod) { p.Status.NominatedNodeName = "n" }, want: false},
		{name: "deleting", change: func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }, want: false},
		{name: "bound", change: func(p *corev1.Pod) { p.Spec.NodeName = "n" }, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.change(n)
			if got := onlyConditionsChanged(base, n); got != tc.want {
				t.Errorf("onlyConditionsChanged = %v, want %v", got, tc.want)
			}
		})
	}
}
