package clusterspec

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// APIVersion and Kind identify a cluster spec file.
const (
	APIVersion = "lockstep.dev/v1alpha1"
	Kind       = "Cluster"
)

// Cluster is the whole simulated cluster: node pools plus optional extra
// DeviceClasses. One DeviceClass per driver is always created.
type Cluster struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Name is informational; it appears in `lockstep dev up` output.
	Name string `json:"name,omitempty"`
	// NodePools are expanded in order; node names must be unique across pools.
	NodePools []NodePool `json:"nodePools"`
	// DeviceClasses are created in addition to the one-per-driver classes.
	DeviceClasses []DeviceClass `json:"deviceClasses,omitempty"`
}

// NodePool is Count identical nodes, except for what the templates vary by
// node index.
type NodePool struct {
	// Name of the pool; nodes are named "<name>-<index>" unless NameTemplate says otherwise.
	Name  string `json:"name"`
	Count int    `json:"count"`
	// NameTemplate is a Go template over NodeVars, e.g. "gpu-{{.Index}}".
	NameTemplate string `json:"nameTemplate,omitempty"`
	// Capacity is the node's capacity and allocatable: cpu, memory, pods,
	// ephemeral-storage and extended resources such as example.com/gpu.
	Capacity map[corev1.ResourceName]resource.Quantity `json:"capacity"`
	// Labels are Go templates over NodeVars, so a pool can spread its nodes
	// over racks: {"rack": "rack-{{div .Index 2}}"}.
	Labels map[string]string `json:"labels,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
	// OSImage is what the nodes report as status.nodeInfo.osImage, e.g.
	// "Bottlerocket OS 1.63.0 (aws-k8s-1.34-nvidia)"; default "lockstep-sim".
	OSImage string `json:"osImage,omitempty"`
	// Devices are the DRA devices each node publishes, one ResourceSlice per driver.
	Devices []DeviceSet `json:"devices,omitempty"`
}

// DeviceSet is Count devices of one driver on every node of a pool.
type DeviceSet struct {
	Driver string `json:"driver"`
	Count  int    `json:"count"`
	// NameTemplate is a Go template over DeviceVars; default "<first label of driver>-{{.Index}}",
	// e.g. gpu-0, gpu-1 for driver gpu.example.com.
	NameTemplate string `json:"nameTemplate,omitempty"`
	// Attributes by qualified name. A string or version value is a Go template
	// over DeviceVars, so it can vary with the device index, e.g.
	// resource.kubernetes.io/pcieRoot: {string: "pci-{{div .Index 4}}"}.
	Attributes map[string]Attribute `json:"attributes,omitempty"`
	// Capacity by qualified name, e.g. memory: 80Gi.
	Capacity map[string]resource.Quantity `json:"capacity,omitempty"`
	// Counters make each device of the set partitionable (DRA partitionable
	// devices): every device gets a shared counter set of its own, named
	// "<device>-counters", holding these counters (DNS-label names), and
	// consumes all of them itself, so it is allocated whole only while no
	// partition of it is, and the other way round.
	Counters map[string]resource.Quantity `json:"counters,omitempty"`
	// Partitions are further devices carved out of each device of the set
	// (MIG slices of a GPU), each taking part of its counters. They need
	// Counters.
	Partitions []Partition `json:"partitions,omitempty"`
}

// Partition is Count devices carved out of each device of a set.
type Partition struct {
	// Name is a DNS label; the devices are "<device>-<name>-<n>", e.g.
	// gpu-0-1g-0, unless NameTemplate says otherwise.
	Name  string `json:"name"`
	Count int    `json:"count"`
	// NameTemplate is a Go template over DeviceVars (.Index is the device
	// partitioned, .Partition the partition's index).
	NameTemplate string `json:"nameTemplate,omitempty"`
	// Attributes are those of the device partitioned, with these added or
	// replaced; templates see DeviceVars.
	Attributes map[string]Attribute `json:"attributes,omitempty"`
	// Capacity of one partition (the device's capacity is not inherited).
	Capacity map[string]resource.Quantity `json:"capacity,omitempty"`
	// Consumes is what one partition takes of its device's counters; every
	// name must be one of the set's counters.
	Consumes map[string]resource.Quantity `json:"consumes"`
}

// Attribute is exactly one typed value. Int and Bool accept a literal or a
// template string that renders to one.
type Attribute struct {
	String  *string   `json:"string,omitempty"`
	Int     *Template `json:"int,omitempty"`
	Bool    *Template `json:"bool,omitempty"`
	Version *string   `json:"version,omitempty"`
}

// DeviceClass is an extra DeviceClass with CEL selectors.
type DeviceClass struct {
	Name      string   `json:"name"`
	Selectors []string `json:"selectors"`
}

// Template is a YAML scalar kept as text: 3, true and "{{.Index}}" all parse.
type Template string

// UnmarshalJSON accepts a JSON string, number or bool.
func (t *Template) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = Template(s)
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case float64:
		*t = Template(strconv.FormatFloat(x, 'f', -1, 64))
	case bool:
		*t = Template(strconv.FormatBool(x))
	default:
		return fmt.Errorf("want a string, number or bool, got %s", string(b))
	}
	return nil
}

// NodeVars are the variables of node name and label templates.
type NodeVars struct {
	Pool string
	// Index is the node's index within its pool, from 0.
	Index int
	// ClusterIndex is the node's index across all pools, from 0.
	ClusterIndex int
}

// DeviceVars are the variables of device name and attribute templates.
type DeviceVars struct {
	Pool      string
	Node      string
	NodeIndex int
	Driver    string
	// Index is the device's index within its set on this node, from 0
	// (for a partition: the index of the device it is carved from).
	Index int
	// Partition is a partition's index among those of its kind on its
	// device, from 0 (0 for a whole device).
	Partition int
}
