package provision

import (
	"fmt"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
)

// InstanceTypes is what Lockstep knows of the nodes Karpenter can make:
// Karpenter learns its instance types from its cloud provider, which
// Lockstep cannot read, and a node's DRA devices are published only once
// it runs. An administrator lists the instance types gangs may need (the
// chart's karpenter.instanceTypes; `lockstep scheduler
// --karpenter-instance-types FILE`), each as the node it makes: its
// allocatable resources, its labels, and its devices in the cluster spec's
// words (clusterspec.DeviceSet: driver, count, attributes), so that the
// devices planned are those its DRA driver will publish.
type InstanceTypes struct {
	InstanceTypes []InstanceType `json:"instanceTypes"`
}

// InstanceType is one kind of node Karpenter can launch.
type InstanceType struct {
	// Name is its node.kubernetes.io/instance-type, e.g. p5.48xlarge.
	Name string `json:"name"`
	// Zones and CapacityTypes are where and how it is offered (every
	// combination); a NodePool's requirements narrow them.
	Zones         []string `json:"zones"`
	CapacityTypes []string `json:"capacityTypes,omitempty"`
	// Allocatable is what pods can use of one node: cpu, memory, pods,
	// extended resources.
	Allocatable corev1.ResourceList `json:"allocatable"`
	// Labels are further labels its nodes carry (e.g. its GPU model).
	Labels map[string]string `json:"labels,omitempty"`
	// Devices are the DRA devices one node publishes.
	Devices []clusterspec.DeviceSet `json:"devices,omitempty"`
}

// LoadInstanceTypes reads and validates an instance types file.
func LoadInstanceTypes(path string) ([]InstanceType, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseInstanceTypes(b)
}

// ParseInstanceTypes parses and validates instance types.
func ParseInstanceTypes(b []byte) ([]InstanceType, error) {
	var its InstanceTypes
	if err := yaml.UnmarshalStrict(b, &its); err != nil {
		return nil, fmt.Errorf("instance types: %w", err)
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, it := range its.InstanceTypes {
		p := field.NewPath("instanceTypes").Index(i)
		switch {
		case it.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "the node.kubernetes.io/instance-type value"))
		case seen[it.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), it.Name))
		}
		seen[it.Name] = true
		if len(it.Zones) == 0 {
			errs = append(errs, field.Required(p.Child("zones"), "the zones it is offered in"))
		}
		if _, ok := it.Allocatable[corev1.ResourcePods]; !ok {
			errs = append(errs, field.Required(p.Child("allocatable", "pods"), "how many pods one node takes"))
		}
		// The devices are rendered as the cluster spec renders a node's:
		// validate them the same way.
		if verrs := clusterspec.Validate(it.cluster("validate", 1, nil, nil)); len(verrs) > 0 {
			errs = append(errs, field.Invalid(p.Child("devices"), it.Name, verrs.ToAggregate().Error()))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("instance types: %w", errs.ToAggregate())
	}
	return its.InstanceTypes, nil
}

// Offering is one kind of node a NodePool can make: an instance type in a
// zone, of a capacity type.
type Offering struct {
	NodePool     *NodePool
	InstanceType *InstanceType
	Zone         string
	CapacityType string
}

// String is "gpu-8x in zone-a (on-demand) from NodePool gpu".
func (o Offering) String() string { return describe(o) + " from NodePool " + o.NodePool.Name }

// Key identifies the offering (pool/type/zone/capacity type).
func (o Offering) Key() string {
	return strings.Join([]string{o.NodePool.Name, o.InstanceType.Name, o.Zone, o.CapacityType}, "/")
}

// DescribeKey is String of the offering a Key names.
func DescribeKey(key string) string {
	parts := strings.Split(key, "/")
	if len(parts) != 4 {
		return key
	}
	return describe(Offering{NodePool: &NodePool{Name: parts[0]}, InstanceType: &InstanceType{Name: parts[1]}, Zone: parts[2], CapacityType: parts[3]}) + " from NodePool " + parts[0]
}

// labels are the labels a node of the offering carries.
func (o Offering) labels() map[string]string {
	l := map[string]string{
		corev1.LabelOSStable:           "linux",
		corev1.LabelArchStable:         "amd64",
		corev1.LabelInstanceTypeStable: o.InstanceType.Name,
		corev1.LabelTopologyZone:       o.Zone,
		NodePoolLabel:                  o.NodePool.Name,
	}
	if o.CapacityType != "" {
		l[CapacityTypeLabel] = o.CapacityType
	}
	for k, v := range o.InstanceType.Labels {
		l[k] = v
	}
	for k, v := range o.NodePool.Labels {
		l[k] = v
	}
	// A requirement of one value the node must carry is a label of it
	// (Karpenter labels its nodes so).
	for _, r := range o.NodePool.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			if _, set := l[r.Key]; !set {
				l[r.Key] = r.Values[0]
			}
		}
	}
	return l
}

// Offerings are the offerings of the NodePools (Karpenter's order: weight,
// then name) that their requirements admit, skipping static NodePools
// (Karpenter makes no NodeClaim for them) and those excluded (offerings
// whose launches failed, by Key).
func Offerings(pools []*NodePool, types []InstanceType, excluded map[string]bool) []Offering {
	sorted := append([]*NodePool(nil), pools...)
	sortPools(sorted)
	var out []Offering
	for _, np := range sorted {
		if np.Static {
			continue
		}
		for i := range types {
			it := &types[i]
			capTypes := it.CapacityTypes
			if len(capTypes) == 0 {
				capTypes = []string{"on-demand"}
			}
			for _, zone := range it.Zones {
				for _, ct := range capTypes {
					o := Offering{NodePool: np, InstanceType: it, Zone: zone, CapacityType: ct}
					if excluded[o.Key()] || !np.allows(o.labels()) {
						continue
					}
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// render makes count nodes of the instance type named after prefix, with
// their ResourceSlices, as the cluster spec renders a pool.
func (it *InstanceType) render(prefix string, count int, labels map[string]string, taints []corev1.Taint) (*clusterspec.Objects, error) {
	objs, err := clusterspec.Render(it.cluster(prefix, count, labels, taints))
	if err != nil {
		return nil, err
	}
	for _, n := range objs.Nodes {
		// The cluster spec's own marks are not Karpenter's nodes'.
		for _, k := range []string{clusterspec.SimulatedLabel, clusterspec.NodePoolLabel} {
			if _, mine := labels[k]; !mine {
				delete(n.Labels, k)
			}
		}
		n.Annotations = nil
	}
	return objs, nil
}

// cluster is a cluster spec of count nodes of the instance type (label
// values cannot hold a template's braces: they render as themselves).
func (it *InstanceType) cluster(prefix string, count int, labels map[string]string, taints []corev1.Taint) *clusterspec.Cluster {
	capacity := map[corev1.ResourceName]resource.Quantity{}
	for k, q := range it.Allocatable {
		capacity[k] = q
	}
	pool := clusterspec.NodePool{Name: prefix, Count: count, Capacity: capacity, Taints: taints, Devices: it.Devices, Labels: labels}
	return &clusterspec.Cluster{NodePools: []clusterspec.NodePool{pool}}
}

// sortPools orders NodePools as Karpenter tries them: higher weight first,
// then by name.
func sortPools(pools []*NodePool) {
	sort.SliceStable(pools, func(i, j int) bool {
		if pools[i].Weight != pools[j].Weight {
			return pools[i].Weight > pools[j].Weight
		}
		return pools[i].Name < pools[j].Name
	})
}
