package clusterspec

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/blang/semver/v4"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Labels Lockstep's simulator puts on every node it creates.
const (
	// NodePoolLabel names the cluster spec pool a node came from.
	NodePoolLabel = "sim.lockstep.dev/node-pool"
	// SimulatedLabel marks a node as simulated (kwok runs its status).
	SimulatedLabel = "sim.lockstep.dev/simulated"
	// OSImageAnnotation carries a pool's osImage to the simulator, which
	// reports it in status.nodeInfo.
	OSImageAnnotation = "sim.lockstep.dev/os-image"
)

// Objects are the API objects a cluster spec stands for.
type Objects struct {
	Nodes          []*corev1.Node
	ResourceSlices []*resourcev1.ResourceSlice
	DeviceClasses  []*resourcev1.DeviceClass
}

// DeviceCount is the number of devices all slices publish.
func (o *Objects) DeviceCount() int {
	n := 0
	for _, s := range o.ResourceSlices {
		n += len(s.Spec.Devices)
	}
	return n
}

// Render turns a validated spec into API objects. It is deterministic: the
// same spec always gives the same objects in the same order.
func Render(c *Cluster) (*Objects, error) {
	objs, errs := render(c)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return objs, nil
}

var templateFuncs = template.FuncMap{
	"add": func(a, b int) int { return a + b },
	"sub": func(a, b int) int { return a - b },
	"mul": func(a, b int) int { return a * b },
	"div": func(a, b int) int {
		if b == 0 {
			return 0
		}
		return a / b
	},
	"mod": func(a, b int) int {
		if b == 0 {
			return 0
		}
		return a % b
	},
}

func expand(p *field.Path, text string, vars any) (string, *field.Error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	t, err := template.New(p.String()).Funcs(templateFuncs).Option("missingkey=error").Parse(text)
	if err != nil {
		return "", field.Invalid(p, text, errorf("template: %v", err))
	}
	var b bytes.Buffer
	if err := t.Execute(&b, vars); err != nil {
		return "", field.Invalid(p, text, errorf("template: %v", err))
	}
	return b.String(), nil
}

func render(c *Cluster) (*Objects, field.ErrorList) {
	var errs field.ErrorList
	objs := &Objects{}
	seenNode := map[string]*field.Path{}
	drivers := map[string]bool{}
	clusterIndex := 0
	for pi := range c.NodePools {
		np := &c.NodePools[pi]
		pp := field.NewPath("nodePools").Index(pi)
		for i := 0; i < np.Count; i++ {
			vars := NodeVars{Pool: np.Name, Index: i, ClusterIndex: clusterIndex}
			clusterIndex++
			node, nerrs := renderNode(np, pp, vars)
			errs = append(errs, nerrs...)
			if node == nil {
				continue
			}
			if prev, dup := seenNode[node.Name]; dup {
				errs = append(errs, field.Duplicate(pp.Child("nameTemplate"), errorf("node %q also produced by %s", node.Name, prev)))
				continue
			}
			seenNode[node.Name] = pp
			objs.Nodes = append(objs.Nodes, node)
			for di := range np.Devices {
				ds := &np.Devices[di]
				drivers[ds.Driver] = true
				slices, serrs := renderSlices(ds, pp.Child("devices").Index(di), node.Name, i)
				errs = append(errs, serrs...)
				objs.ResourceSlices = append(objs.ResourceSlices, slices...)
			}
		}
	}
	objs.DeviceClasses = renderClasses(c, drivers)
	return objs, errs
}

func renderNode(np *NodePool, p *field.Path, vars NodeVars) (*corev1.Node, field.ErrorList) {
	var errs field.ErrorList
	name := fmt.Sprintf("%s-%d", np.Name, vars.Index)
	if np.NameTemplate != "" {
		var err *field.Error
		if name, err = expand(p.Child("nameTemplate"), np.NameTemplate, vars); err != nil {
			return nil, field.ErrorList{err}
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p.Child("nameTemplate"), name, msg))
	}
	labels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		NodePoolLabel:          np.Name,
		SimulatedLabel:         "true",
	}
	for k, v := range np.Labels {
		lp := p.Child("labels").Key(k)
		val, err := expand(lp, v, vars)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(lp, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(val) {
			errs = append(errs, field.Invalid(lp, val, msg))
		}
		labels[k] = val
	}
	if len(errs) > 0 {
		return nil, errs
	}
	capacity := corev1.ResourceList{}
	for k, q := range np.Capacity {
		capacity[k] = q.DeepCopy()
	}
	// kwok's convention for nodes it fakes; informational here since the
	// simulator manages every node of the local cluster.
	annotations := map[string]string{"kwok.x-k8s.io/node": "fake"}
	if np.OSImage != "" {
		annotations[OSImageAnnotation] = np.OSImage
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{Taints: append([]corev1.Taint(nil), np.Taints...)},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
		},
	}, nil
}

// renderSlices renders the pool of one driver on one node (pool name =
// node name): one slice of devices, or, for a partitionable set, its
// devices (whole and partitions) and their counter sets in as many slices
// as the API's limits need, all of one pool.
func renderSlices(ds *DeviceSet, p *field.Path, node string, nodeIndex int) ([]*resourcev1.ResourceSlice, field.ErrorList) {
	var errs field.ErrorList
	nameTemplate := ds.NameTemplate
	if nameTemplate == "" {
		nameTemplate = strings.SplitN(ds.Driver, ".", 2)[0] + "-{{.Index}}"
	}
	devices := make([]resourcev1.Device, 0, ds.Count)
	var counterSets []resourcev1.CounterSet
	for i := 0; i < ds.Count; i++ {
		vars := DeviceVars{Node: node, NodeIndex: nodeIndex, Driver: ds.Driver, Index: i}
		dev, derrs := renderDevice(ds, p, nameTemplate, vars)
		errs = append(errs, derrs...)
		if dev == nil {
			continue
		}
		if len(ds.Counters) == 0 {
			devices = append(devices, *dev)
			continue
		}
		set := dev.Name + "-counters"
		counterSets = append(counterSets, resourcev1.CounterSet{Name: set, Counters: counters(ds.Counters)})
		dev.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: set, Counters: counters(ds.Counters)}}
		parts, perrs := renderPartitions(ds, p, dev, set, vars)
		errs = append(errs, perrs...)
		devices = append(append(devices, *dev), parts...)
	}
	errs = append(errs, duplicateDevices(p, devices)...)
	if len(errs) > 0 {
		return nil, errs
	}
	if len(counterSets) == 0 {
		return []*resourcev1.ResourceSlice{poolSlice(node+"-"+ds.Driver, node, ds.Driver, 1, devices, nil)}, nil
	}
	var deviceChunks [][]resourcev1.Device
	for len(devices) > 0 {
		n := min(len(devices), resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures)
		deviceChunks, devices = append(deviceChunks, devices[:n]), devices[n:]
	}
	var setChunks [][]resourcev1.CounterSet
	for len(counterSets) > 0 {
		n := min(len(counterSets), resourcev1.ResourceSliceMaxCounterSets)
		setChunks, counterSets = append(setChunks, counterSets[:n]), counterSets[n:]
	}
	total := int64(len(deviceChunks) + len(setChunks))
	var out []*resourcev1.ResourceSlice
	for i, c := range setChunks {
		out = append(out, poolSlice(fmt.Sprintf("%s-%s-counters-%d", node, ds.Driver, i), node, ds.Driver, total, nil, c))
	}
	for i, c := range deviceChunks {
		name := node + "-" + ds.Driver
		if i > 0 {
			name = fmt.Sprintf("%s-%d", name, i)
		}
		out = append(out, poolSlice(name, node, ds.Driver, total, c, nil))
	}
	return out, nil
}

func poolSlice(name, node, driver string, count int64, devices []resourcev1.Device, sets []resourcev1.CounterSet) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:         driver,
			NodeName:       ptr.To(node),
			Pool:           resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: count},
			Devices:        devices,
			SharedCounters: sets,
		},
	}
}

// renderPartitions renders the partitions carved out of dev, each
// consuming from its counter set; they inherit dev's attributes.
func renderPartitions(ds *DeviceSet, p *field.Path, dev *resourcev1.Device, set string, vars DeviceVars) ([]resourcev1.Device, field.ErrorList) {
	var out []resourcev1.Device
	var errs field.ErrorList
	for pi := range ds.Partitions {
		part := &ds.Partitions[pi]
		pp := p.Child("partitions").Index(pi)
		for j := 0; j < part.Count; j++ {
			v := vars
			v.Partition = j
			name := fmt.Sprintf("%s-%s-%d", dev.Name, part.Name, j)
			if part.NameTemplate != "" {
				var err *field.Error
				if name, err = expand(pp.Child("nameTemplate"), part.NameTemplate, v); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(pp.Child("nameTemplate"), name, msg))
			}
			d := resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}}
			for k, a := range dev.Attributes {
				d.Attributes[k] = a
			}
			for _, key := range sortedKeys(part.Attributes) {
				attr, aerr := renderAttribute(part.Attributes[key], pp.Child("attributes").Key(key), v)
				if aerr != nil {
					errs = append(errs, aerr)
					continue
				}
				d.Attributes[resourcev1.QualifiedName(key)] = attr
			}
			if len(d.Attributes) == 0 {
				d.Attributes = nil
			}
			if len(part.Capacity) > 0 {
				d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
				for k, q := range part.Capacity {
					d.Capacity[resourcev1.QualifiedName(k)] = resourcev1.DeviceCapacity{Value: q.DeepCopy()}
				}
			}
			d.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: set, Counters: counters(part.Consumes)}}
			out = append(out, d)
		}
	}
	return out, errs
}

func counters(m map[string]resource.Quantity) map[string]resourcev1.Counter {
	out := make(map[string]resourcev1.Counter, len(m))
	for k, q := range m {
		out[k] = resourcev1.Counter{Value: q.DeepCopy()}
	}
	return out
}

// duplicateDevices reports device names rendered twice in one pool.
func duplicateDevices(p *field.Path, devices []resourcev1.Device) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, d := range devices {
		if seen[d.Name] {
			errs = append(errs, field.Duplicate(p.Child("nameTemplate"), d.Name))
		}
		seen[d.Name] = true
	}
	return errs
}

func renderDevice(ds *DeviceSet, p *field.Path, nameTemplate string, vars DeviceVars) (*resourcev1.Device, field.ErrorList) {
	var errs field.ErrorList
	name, err := expand(p.Child("nameTemplate"), nameTemplate, vars)
	if err != nil {
		return nil, field.ErrorList{err}
	}
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(p.Child("nameTemplate"), name, msg))
	}
	dev := &resourcev1.Device{Name: name}
	if len(ds.Attributes) > 0 {
		dev.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
	}
	for _, key := range sortedKeys(ds.Attributes) {
		attr, aerr := renderAttribute(ds.Attributes[key], p.Child("attributes").Key(key), vars)
		if aerr != nil {
			errs = append(errs, aerr)
			continue
		}
		dev.Attributes[resourcev1.QualifiedName(key)] = attr
	}
	if len(ds.Capacity) > 0 {
		dev.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
		for k, q := range ds.Capacity {
			dev.Capacity[resourcev1.QualifiedName(k)] = resourcev1.DeviceCapacity{Value: q.DeepCopy()}
		}
	}
	return dev, errs
}

func renderAttribute(a Attribute, p *field.Path, vars DeviceVars) (resourcev1.DeviceAttribute, *field.Error) {
	switch {
	case a.String != nil:
		s, err := expand(p.Child("string"), *a.String, vars)
		return resourcev1.DeviceAttribute{StringValue: &s}, err
	case a.Version != nil:
		s, err := expand(p.Child("version"), *a.Version, vars)
		if err != nil {
			return resourcev1.DeviceAttribute{}, err
		}
		if _, perr := semver.Parse(s); perr != nil {
			return resourcev1.DeviceAttribute{}, field.Invalid(p.Child("version"), s, errorf("not a semantic version: %v", perr))
		}
		return resourcev1.DeviceAttribute{VersionValue: &s}, nil
	case a.Int != nil:
		s, err := expand(p.Child("int"), string(*a.Int), vars)
		if err != nil {
			return resourcev1.DeviceAttribute{}, err
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if perr != nil {
			return resourcev1.DeviceAttribute{}, field.Invalid(p.Child("int"), s, "not an integer")
		}
		return resourcev1.DeviceAttribute{IntValue: &n}, nil
	default:
		s, err := expand(p.Child("bool"), string(*a.Bool), vars)
		if err != nil {
			return resourcev1.DeviceAttribute{}, err
		}
		b, perr := strconv.ParseBool(strings.TrimSpace(s))
		if perr != nil {
			return resourcev1.DeviceAttribute{}, field.Invalid(p.Child("bool"), s, "not a bool")
		}
		return resourcev1.DeviceAttribute{BoolValue: &b}, nil
	}
}

// EnsureDeviceClass adds the DeviceClass of a driver no node pool has (the
// real nodes' driver in a spec of simulated nodes without GPUs): named after
// the driver and selecting all of its devices, as the pools' drivers' are.
func (o *Objects) EnsureDeviceClass(driver string) {
	for _, dc := range o.DeviceClasses {
		if dc.Name == driver {
			return
		}
	}
	o.DeviceClasses = append(o.DeviceClasses, deviceClass(driver, fmt.Sprintf("device.driver == %q", driver)))
}

// renderClasses makes one DeviceClass per driver, named after the driver and
// selecting all of its devices, then the spec's extra classes.
func renderClasses(c *Cluster, drivers map[string]bool) []*resourcev1.DeviceClass {
	var classes []*resourcev1.DeviceClass
	for _, d := range sortedKeys(drivers) {
		classes = append(classes, deviceClass(d, fmt.Sprintf("device.driver == %q", d)))
	}
	for _, dc := range c.DeviceClasses {
		classes = append(classes, deviceClass(dc.Name, dc.Selectors...))
	}
	return classes
}

func deviceClass(name string, exprs ...string) *resourcev1.DeviceClass {
	dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range exprs {
		dc.Spec.Selectors = append(dc.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return dc
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
