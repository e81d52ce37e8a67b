package provision

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// Nodes are grouped by the group that made them, instance type and zone;
// a group is planned as more nodes like its first schedulable one, with
// its devices, less the taints of that node's own state.
func TestNodeGroups(t *testing.T) {
	node := func(name string, labels map[string]string, cordoned bool, taints ...corev1.Taint) *corev1.Node {
		b := builders.MakeNode().Name(name).Capacity(corev1.ResourceCPU, "8")
		for k, v := range labels {
			b.Label(k, v)
		}
		n := b.Obj()
		n.Spec.Unschedulable = cordoned
		n.Spec.Taints = taints
		return n
	}
	eksA := map[string]string{"eks.amazonaws.com/nodegroup": "gpu", corev1.LabelInstanceTypeStable: "p5.48xlarge", corev1.LabelTopologyZone: "us-east-1a"}
	eksB := map[string]string{"eks.amazonaws.com/nodegroup": "gpu", corev1.LabelInstanceTypeStable: "p5.48xlarge", corev1.LabelTopologyZone: "us-east-1b"}
	nodes := []*corev1.Node{
		node("a-2", eksA, false, corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}),
		node("a-1", eksA, true), // cordoned: not the template
		node("a-3", eksA, false),
		node("b-1", eksB, false),
		node("dyn-1", map[string]string{NodePoolLabel: "spot", corev1.LabelInstanceTypeStable: "g6"}, false),
		node("bare", nil, false), // names no group, no instance type
		node("m-1", map[string]string{corev1.LabelInstanceTypeStable: "m7i"}, true, corev1.Taint{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}),
	}
	slice := &resourcev1.ResourceSlice{}
	slice.Name = "a-2-gpu"
	slice.Spec.NodeName = new(string)
	*slice.Spec.NodeName = "a-2"
	slice.Spec.Pool.Name = "a-2"
	slice.Spec.Driver = "gpu.example.com"
	slices := func(n string) []*resourcev1.ResourceSlice {
		if n == "a-2" {
			return []*resourcev1.ResourceSlice{slice}
		}
		return nil
	}
	groups := NodeGroups(nodes, slices, func(n *corev1.Node) bool { return n.Labels[NodePoolLabel] == "spot" })
	var got []string
	for _, g := range groups {
		got = append(got, fmt.Sprintf("%s ×%d like %s", g, g.Nodes, g.Template.Name))
	}
	want := []string{
		"node group gpu (p5.48xlarge in us-east-1a) ×3 like a-2",
		"node group gpu (p5.48xlarge in us-east-1b) ×1 like b-1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want,+got):\n%s", diff)
	}

	a := groups[0]
	a.Template.Spec.Taints = append(a.Template.Spec.Taints,
		corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		corev1.Taint{Key: v1beta1.ReservedForTaint, Value: "x", Effect: corev1.TaintEffectNoSchedule})
	ns, ss := a.Like(2)
	if len(ns) != 2 || len(ss) != 2 {
		t.Fatalf("Like(2): %d nodes, %d slices; want 2 and 2", len(ns), len(ss))
	}
	for i, n := range ns {
		if n.Labels[corev1.LabelHostname] != n.Name || n.Labels[corev1.LabelTopologyZone] != "us-east-1a" || n.Name == "a-2" {
			t.Errorf("node %d: name %s labels %v, want its own hostname in the template's zone", i, n.Name, n.Labels)
		}
		if diff := cmp.Diff([]corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}, n.Spec.Taints); diff != "" {
			t.Errorf("node %d taints (-want,+got):\n%s", i, diff)
		}
		if s := ss[i]; *s.Spec.NodeName != n.Name || s.Spec.Pool.Name != n.Name || s.Name == slice.Name {
			t.Errorf("slice %d: node %s pool %s name %s, want the new node's own", i, *s.Spec.NodeName, s.Spec.Pool.Name, s.Name)
		}
	}
	if *slice.Spec.NodeName != "a-2" {
		t.Errorf("the template's slice was changed")
	}

	logger := ktesting.NewLogger(t, ktesting.DefaultConfig)
	tolerates := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
	pod := func(cpu string, tolerate bool, zone string) *corev1.Pod {
		p := builders.MakePod().Name("p").Req(corev1.ResourceCPU, cpu).Obj()
		if tolerate {
			p.Spec.Tolerations = tolerates
		}
		if zone != "" {
			p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: zone}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"fits, tolerates", pod("4", true, ""), true},
		{"does not tolerate the group's taint", pod("4", false, ""), false},
		{"more CPU than a node has", pod("16", true, ""), false},
		{"selects another zone", pod("1", true, "us-east-1b"), false},
	} {
		if got := a.Admits(logger, tc.pod); got != tc.want {
			t.Errorf("Admits %s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
