package cachetrim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

func TestTransform(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}, ManagedFields: mf},
		Status: corev1.NodeStatus{
			Images:      []corev1.ContainerImage{{Names: []string{"trainer:1"}, SizeBytes: 1 << 30}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: *resourceQuantity("8")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"a": "b"}, ManagedFields: mf}, Spec: corev1.PodSpec{NodeName: "n"}}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "pg", "managedFields": []any{map[string]any{"manager": "x"}}}, "spec": map[string]any{"minCount": int64(4)}}}

	for _, obj := range []any{node, pod, u} {
		if _, err := Transform(obj); err != nil {
			t.Fatal(err)
		}
	}
	if node.ManagedFields != nil || node.Status.Images != nil {
		t.Errorf("node keeps managedFields %v or images %v", node.ManagedFields, node.Status.Images)
	}
	if node.Labels["zone"] != "a" || len(node.Status.Conditions) != 1 || node.Status.Allocatable.Cpu().String() != "8" {
		t.Errorf("node lost what the scheduler reads: %+v", node)
	}
	if pod.ManagedFields != nil || pod.Annotations["a"] != "b" || pod.Spec.NodeName != "n" {
		t.Errorf("pod: %+v", pod.ObjectMeta)
	}
	if _, ok := u.Object["metadata"].(map[string]any)["managedFields"]; ok {
		t.Errorf("unstructured keeps managedFields: %v", u.Object)
	}
	if u.Object["spec"].(map[string]any)["minCount"] != int64(4) {
		t.Errorf("unstructured lost its spec: %v", u.Object)
	}
	// A delete tombstone passes through untouched.
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}
	if got, err := Transform(tomb); err != nil || got != any(tomb) {
		t.Errorf("tombstone: %v, %v", got, err)
	}
}

func resourceQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
