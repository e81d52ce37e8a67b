package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// NodeWrapper builds a Node.
type NodeWrapper struct{ corev1.Node }

// MakeNode starts a Ready node with room for 110 pods and nothing else.
func MakeNode() *NodeWrapper {
	w := &NodeWrapper{corev1.Node{Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}}
	return w.Capacity(corev1.ResourcePods, "110")
}

// Obj returns the built node.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

func (w *NodeWrapper) Name(n string) *NodeWrapper { w.Node.Name = n; return w }

// Label sets a label (a topology domain, a selector target).
func (w *NodeWrapper) Label(k, v string) *NodeWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Capacity sets a resource's capacity and allocatable.
func (w *NodeWrapper) Capacity(name corev1.ResourceName, qty string) *NodeWrapper {
	if w.Status.Capacity == nil {
		w.Status.Capacity = corev1.ResourceList{}
		w.Status.Allocatable = corev1.ResourceList{}
	}
	w.Status.Capacity[name] = resource.MustParse(qty)
	w.Status.Allocatable[name] = resource.MustParse(qty)
	return w
}

// Taint adds a taint.
func (w *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	w.Spec.Taints = append(w.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// Unschedulable cordons the node.
func (w *NodeWrapper) Unschedulable() *NodeWrapper { w.Spec.Unschedulable = true; return w }

// NotReady makes the node's Ready condition False.
func (w *NodeWrapper) NotReady() *NodeWrapper {
	w.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	return w
}

// nodeSelectorFor selects the node of that name (a claim allocated on it).
func nodeSelectorFor(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
}
