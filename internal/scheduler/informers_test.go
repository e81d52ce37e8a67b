package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// A PodGroup's own conditions — its first too, which creates its status —
// queue nothing; a change of its spec or of the rest of its status does.
func TestOnlyGroupConditionsChanged(t *testing.T) {
	group := func(status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.lockstep.dev/v1beta1", "kind": "PodGroup",
			"metadata": map[string]any{"name": "g", "namespace": "ns", "resourceVersion": "1"},
			"spec":     map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(4)}}},
		}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	cond := func(reason string) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": "PodGroupInitiallyScheduled", "status": "False", "reason": reason}}}
	}
	for _, tc := range []struct {
		name     string
		old, new *unstructured.Unstructured
		want     bool
	}{
		{name: "its first condition", old: group(nil), new: group(cond("WaitingForPods")), want: true},
		{name: "a new condition", old: group(cond("WaitingForPods")), new: group(cond("Unschedulable")), want: true},
		{name: "minCount", old: group(cond("Unschedulable")), new: func() *unstructured.Unstructured {
			g := group(cond("Unschedulable"))
			_ = unstructured.SetNestedField(g.Object, int64(2), "spec", "schedulingPolicy", "gang", "minCount")
			return g
		}(), want: false},
		{name: "the incarnation", old: group(cond("Unschedulable")), new: group(map[string]any{"incarnation": map[string]any{"number": int64(1)}}), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.new.SetResourceVersion("2")
			if got := onlyGroupConditionsChanged(tc.old, tc.new); got != tc.want {
				t.Errorf("onlyGroupConditionsChanged = %v, want %v", got, tc.want)
			}
		})
	}
}
