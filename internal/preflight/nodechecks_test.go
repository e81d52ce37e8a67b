package preflight

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// node builds a node: labels as key=value pairs, extended resources it
// advertises, and (osImage) its OS.
type nodeSpec struct {
	name     string
	labels   map[string]string
	extended []corev1.ResourceName
	tainted  bool
	// taintKey, when set, is the key of that taint (default "spot").
	taintKey string
	osImage  string
	drivers  []string
}

func build(specs ...nodeSpec) ([]corev1.Node, []resourcev1.ResourceSlice) {
	var nodes []corev1.Node
	var slices []resourcev1.ResourceSlice
	for _, s := range specs {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: s.labels}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
		for _, r := range s.extended {
			n.Status.Allocatable[r] = resource.MustParse("4")
			n.Status.Capacity[r] = resource.MustParse("4")
		}
		if s.tainted {
			key := s.taintKey
			if key == "" {
				key = "spot"
			}
			n.Spec.Taints = []corev1.Taint{{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}
		n.Status.NodeInfo.OSImage = s.osImage
		nodes = append(nodes, n)
		for _, d := range s.drivers {
			slices = append(slices, resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
				Driver: d, NodeName: ptr.To(s.name), Pool: resourcev1.ResourcePool{Name: s.name},
				Devices: []resourcev1.Device{{Name: "d0"}, {Name: "d1"}},
			}})
		}
	}
	return nodes, slices
}

func views(static map[string]bool, specs ...nodeSpec) []nodeView {
	nodes, slices := build(specs...)
	return inventory(nodes, slices, static)
}

// status is a check's status and the nodes it names.
type status struct {
	Status Status
	Nodes  []string
}

func TestNodeChecks(t *testing.T) {
	p5 := map[string]string{corev1.LabelInstanceTypeStable: "p5.48xlarge", labelNodegroup: "gpu"}
	for _, tc := range []struct {
		name   string
		check  func([]nodeView) Check
		static map[string]bool
		nodes  []nodeSpec
		want   status
	}{
		{name: "spot: none", check: checkSpot, nodes: []nodeSpec{{name: "a"}}, want: status{Status: OK}},
		{name: "spot: a managed node group's Spot node gangs can land on", check: checkSpot,
			nodes: []nodeSpec{{name: "a", labels: map[string]string{labelEKSCapacityType: "SPOT"}}, {name: "b", labels: map[string]string{labelEKSCapacityType: "ON_DEMAND"}}},
			want:  status{Warn, []string{"a"}}},
		{name: "spot: a Karpenter Spot node", check: checkSpot,
			nodes: []nodeSpec{{name: "k", labels: map[string]string{labelKarpenterCap: "spot"}}},
			want:  status{Warn, []string{"k"}}},
		{name: "spot: tainted Spot nodes keep gangs off unless they tolerate it", check: checkSpot,
			nodes: []nodeSpec{{name: "k", labels: map[string]string{labelKarpenterCap: "spot"}, tainted: true}},
			want:  status{Status: OK}},
		{name: "spot: a Spot GPU pool tainted with its own resource is no guard (GPU pods tolerate it)", check: checkSpot,
			nodes: []nodeSpec{{name: "g", labels: map[string]string{labelKarpenterCap: "spot"}, extended: []corev1.ResourceName{"nvidia.com/gpu"}, tainted: true, taintKey: "nvidia.com/gpu"}},
			want:  status{Warn, []string{"g"}}},
		{name: "spot: a taint keyed like a resource the node does not advertise still guards", check: checkSpot,
			nodes: []nodeSpec{{name: "g", labels: map[string]string{labelKarpenterCap: "spot"}, tainted: true, taintKey: "nvidia.com/gpu"}},
			want:  status{Status: OK}},
		{name: "efa: no EFA-capable type", check: checkEFA,
			nodes: []nodeSpec{{name: "a", labels: map[string]string{corev1.LabelInstanceTypeStable: "m7i.large"}}}, want: status{Status: OK}},
		{name: "efa: p5 with neither plugin nor slices", check: checkEFA,
			nodes: []nodeSpec{{name: "a", labels: p5, drivers: []string{"gpu.nvidia.com"}}, {name: "b", labels: p5, extended: []corev1.ResourceName{ResourceEFA}}, {name: "c", labels: p5, drivers: []string{DriverEFA}}},
			want:  status{Warn, []string{"a"}}},
		{name: "efa: the beta instance-type label counts too", check: checkEFA,
			nodes: []nodeSpec{{name: "a", labels: map[string]string{corev1.LabelInstanceType: "trn1.32xlarge"}}},
			want:  status{Warn, []string{"a"}}},
		{name: "dra supply: managed, self-managed and static Karpenter may run drivers", check: func(v []nodeView) Check { return checkDRASupply(v, true) },
			static: map[string]bool{"reserved": true},
			nodes: []nodeSpec{{name: "a", labels: map[string]string{labelNodegroup: "ng"}, drivers: []string{"gpu.nvidia.com"}}, {name: "b", drivers: []string{"gpu.nvidia.com"}},
				{name: "c", labels: map[string]string{labelNodePool: "reserved"}, drivers: []string{"gpu.nvidia.com"}}},
			want: status{Status: OK}},
		{name: "dra supply: slices on Auto Mode and on a dynamic NodePool", check: func(v []nodeView) Check { return checkDRASupply(v, true) },
			static: map[string]bool{},
			nodes: []nodeSpec{{name: "auto", labels: map[string]string{labelComputeType: "auto", labelNodePool: "general-purpose"}, drivers: []string{DriverEFA}},
				{name: "dyn", labels: map[string]string{labelNodePool: "gpus"}, drivers: []string{"gpu.nvidia.com"}},
				{name: "plugin", labels: map[string]string{labelNodePool: "gpus"}, extended: []corev1.ResourceName{"nvidia.com/gpu"}}},
			want: status{Fail, []string{"auto", "dyn"}}},
		{name: "dra supply: Auto Mode fails even when its NodePool is static", check: func(v []nodeView) Check { return checkDRASupply(v, true) },
			static: map[string]bool{"static-auto": true},
			nodes:  []nodeSpec{{name: "auto", labels: map[string]string{labelComputeType: "auto", labelNodePool: "static-auto"}, drivers: []string{"gpu.nvidia.com"}}},
			want:   status{Fail, []string{"auto"}}},
		{name: "dra supply: NodePools unreadable: warn, not fail", check: func(v []nodeView) Check { return checkDRASupply(v, false) },
			nodes: []nodeSpec{{name: "k", labels: map[string]string{labelNodePool: "gpus"}, drivers: []string{"gpu.nvidia.com"}}},
			want:  status{Warn, []string{"k"}}},
		{name: "alignment: GPU and EFA both on DRA", check: checkAlignment,
			nodes: []nodeSpec{{name: "a", drivers: []string{"gpu.nvidia.com", DriverEFA}}}, want: status{Status: OK}},
		{name: "alignment: both on device plugins is no misconfiguration", check: checkAlignment,
			nodes: []nodeSpec{{name: "a", extended: []corev1.ResourceName{"nvidia.com/gpu", ResourceEFA}}}, want: status{Status: OK}},
		{name: "alignment: GPU on DRA, EFA on the plugin", check: checkAlignment,
			nodes: []nodeSpec{{name: "a", drivers: []string{"gpu.nvidia.com"}, extended: []corev1.ResourceName{ResourceEFA}}, {name: "b", drivers: []string{"gpu.nvidia.com"}}},
			want:  status{Fail, []string{"a"}}},
		{name: "alignment: Neuron on the plugin, EFA on DRA", check: checkAlignment,
			nodes: []nodeSpec{{name: "t", drivers: []string{DriverEFA}, extended: []corev1.ResourceName{"aws.amazon.com/neuron"}}},
			want:  status{Fail, []string{"t"}}},
		{name: "bottlerocket: 1.63.0 with the NVIDIA DRA driver", check: checkBottlerocket,
			nodes: []nodeSpec{{name: "a", osImage: "Bottlerocket OS 1.63.0 (aws-k8s-1.34-nvidia)", drivers: []string{"gpu.nvidia.com"}}}, want: status{Status: OK}},
		{name: "bottlerocket: 1.62.1 with the NVIDIA DRA driver", check: checkBottlerocket,
			nodes: []nodeSpec{{name: "a", osImage: "Bottlerocket OS 1.62.1 (aws-k8s-1.34-nvidia)", drivers: []string{"gpu.nvidia.com"}},
				{name: "b", osImage: "Bottlerocket OS 1.40.0 (aws-k8s-1.34-nvidia)", extended: []corev1.ResourceName{"nvidia.com/gpu"}},
				{name: "c", osImage: "Amazon Linux 2023.7.20250512", drivers: []string{"gpu.nvidia.com"}}},
			want: status{Fail, []string{"a (1.62.1)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.check(views(tc.static, tc.nodes...))
			if diff := cmp.Diff(tc.want, status{c.Status, c.Nodes}); diff != "" {
				t.Errorf("(-want,+got):\n%s\ndetail: %s", diff, c.Detail)
			}
			if c.Status != OK && c.Fix == "" {
				t.Errorf("a %s check must say how to fix it: %+v", c.Status, c)
			}
		})
	}
}

func TestParseFeatureMetric(t *testing.T) {
	in := `# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="ResourceHealthStatus",stage="BETA"} 1
kubernetes_feature_enabled{name="WorkloadWithJob",stage="ALPHA"} 0
apiserver_request_total{code="200"} 5
`
	want := map[string]bool{"ResourceHealthStatus": true, "WorkloadWithJob": false}
	if diff := cmp.Diff(want, parseFeatureMetric([]byte(in))); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestFeatureSummaryNeverWarns(t *testing.T) {
	all := []DRAFeature{{Feature: "a", Cluster: Served}, {Feature: "b", Cluster: Served}}
	if c := featureSummary(all); c.Status != OK {
		t.Errorf("every feature served: want ok, got %+v", c)
	}
	some := []DRAFeature{{Feature: "a", Cluster: NotServed}, {Feature: "b", Cluster: Unknown}}
	if c := featureSummary(some); c.Status != Info {
		t.Errorf("features missing: want info (Lockstep works without them), got %+v", c)
	}
}
