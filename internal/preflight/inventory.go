package preflight

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// Device kinds preflight recognizes on Amazon EKS, both ways they are
// advertised (seed 000 §8.1).
const (
	// ResourceEFA is the EFA device plugin's extended resource.
	ResourceEFA corev1.ResourceName = "vpc.amazonaws.com/efa"
	// DriverEFA is the EFA DRA driver (DRANET); ClassEFA its DeviceClass.
	DriverEFA = "dra.net"
	ClassEFA  = "efa.networking.k8s.aws"
	// AttributePCIeRoot is the attribute GPU, Neuron and EFA drivers
	// publish for the PCIe root a device hangs off: the key of an aligned
	// claim's matchAttribute constraint.
	AttributePCIeRoot = "resource.kubernetes.io/pcieRoot"
)

// efaDrivers publish EFA interfaces as DRA devices.
var efaDrivers = map[string]bool{DriverEFA: true, ClassEFA: true}

// acceleratorDrivers and acceleratorResources are the accelerators a gang's
// collectives run on, as a DRA driver and as a device plugin advertise them.
var (
	acceleratorDrivers   = map[string]bool{"gpu.nvidia.com": true, "neuron.aws.com": true, "gpu.amd.com": true}
	acceleratorResources = map[corev1.ResourceName]bool{"nvidia.com/gpu": true, "aws.amazon.com/neuron": true, "aws.amazon.com/neuroncore": true, "amd.com/gpu": true}
)

// nodeView is what the node checks know of one node: how it is supplied,
// the extended resources it advertises and the DRA devices published for it.
type nodeView struct {
	node   *corev1.Node
	supply supply
	// devices per DRA driver in the node's own ResourceSlices.
	devices map[string]int
}

func (n nodeView) name() string { return n.node.Name }

// advertises reports whether the node has some allocatable of res.
func (n nodeView) advertises(res corev1.ResourceName) bool {
	q, ok := n.node.Status.Allocatable[res]
	return ok && !q.IsZero()
}

// efaOnDRA, efaOnPlugin, acceleratorOnDRA and acceleratorOnPlugin say how
// the node's EFA interfaces and accelerators are allocated.
func (n nodeView) efaOnDRA() bool    { return n.anyDriver(efaDrivers) }
func (n nodeView) efaOnPlugin() bool { return n.advertises(ResourceEFA) }
func (n nodeView) acceleratorOnDRA() bool {
	return n.anyDriver(acceleratorDrivers)
}
func (n nodeView) acceleratorOnPlugin() bool {
	for res := range acceleratorResources {
		if n.advertises(res) {
			return true
		}
	}
	return false
}

func (n nodeView) anyDriver(set map[string]bool) bool {
	for d, count := range n.devices {
		if set[d] && count > 0 {
			return true
		}
	}
	return false
}

// draDrivers are the drivers with devices on the node, sorted.
func (n nodeView) draDrivers() []string {
	var out []string
	for d, count := range n.devices {
		if count > 0 {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// instanceType is the node's EC2 instance type label, or "".
func (n nodeView) instanceType() string {
	if t := n.node.Labels[corev1.LabelInstanceTypeStable]; t != "" {
		return t
	}
	return n.node.Labels[corev1.LabelInstanceType]
}

// inventory joins nodes with their supply model and their slices' devices.
func inventory(nodes []corev1.Node, slices []resourcev1.ResourceSlice, staticNodePools map[string]bool) []nodeView {
	byNode := map[string]map[string]int{}
	for _, s := range slices {
		if s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
			continue
		}
		n := *s.Spec.NodeName
		if byNode[n] == nil {
			byNode[n] = map[string]int{}
		}
		byNode[n][s.Spec.Driver] += len(s.Spec.Devices)
	}
	out := make([]nodeView, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		out = append(out, nodeView{node: n, supply: supplyOf(n, staticNodePools), devices: byNode[n.Name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name() < out[j].name() })
	return out
}

// nodeList is "a, b and 3 more" for messages; the full list goes in
// Check.Nodes.
func nodeList(names []string) string {
	const shown = 4
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:shown], ", ") + " and " + strconv.Itoa(len(names)-shown) + " more"
}
