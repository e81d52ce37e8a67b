package preflight

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// knownPairs are device kinds advertised both ways on Amazon EKS (seed 000
// §8.1): extended resource of the device plugin → DRA driver names.
var knownPairs = map[corev1.ResourceName][]string{
	"nvidia.com/gpu":            {"gpu.nvidia.com"},
	"vpc.amazonaws.com/efa":     {"efa.networking.k8s.aws", "dra.net"},
	"aws.amazon.com/neuron":     {"neuron.aws.com"},
	"aws.amazon.com/neuroncore": {"neuron.aws.com"},
	"amd.com/gpu":               {"gpu.amd.com"},
}

// sameDevice reports whether an extended resource and a DRA driver advertise
// the same kind of device: a known pair, a DeviceClass of the driver that maps
// the resource (extendedResourceName), or the same kind by name
// (example.com/gpu and gpu.example.com).
func sameDevice(res corev1.ResourceName, driver string, classResources map[string][]string) bool {
	for _, d := range knownPairs[res] {
		if d == driver {
			return true
		}
	}
	for _, r := range classResources[driver] {
		if r == string(res) {
			return true
		}
	}
	domain, kind, ok := strings.Cut(string(res), "/")
	if !ok {
		return false
	}
	first, rest, _ := strings.Cut(driver, ".")
	return first == kind && rest == domain
}

// drivers summarizes ResourceSlices per driver.
func drivers(slices []resourcev1.ResourceSlice) ([]Driver, map[string]map[string]bool) {
	nodes := map[string]map[string]bool{}
	devices := map[string]int{}
	for _, s := range slices {
		if nodes[s.Spec.Driver] == nil {
			nodes[s.Spec.Driver] = map[string]bool{}
		}
		if s.Spec.NodeName != nil {
			nodes[s.Spec.Driver][*s.Spec.NodeName] = true
		}
		devices[s.Spec.Driver] += len(s.Spec.Devices)
	}
	var out []Driver
	for d, ns := range nodes {
		out = append(out, Driver{Name: d, Nodes: len(ns), Devices: devices[d]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nodes
}

// overlaps finds nodes where a device plugin and a DRA driver both advertise
// the same kind of device.
func overlaps(nodes []corev1.Node, driverNodes map[string]map[string]bool, classResources map[string][]string) []Overlap {
	var out []Overlap
	for _, n := range nodes {
		for res, q := range n.Status.Allocatable {
			if q.IsZero() || !strings.Contains(string(res), "/") {
				continue
			}
			for driver, on := range driverNodes {
				if !on[n.Name] || !sameDevice(res, driver, classResources) {
					continue
				}
				out = append(out, Overlap{
					Node: n.Name, Driver: driver, ExtendedResource: string(res),
					Fix: fmt.Sprintf("run either the DRA driver %s or the device plugin advertising %s on this node, not both: uninstall the device plugin (Bottlerocket NVIDIA variant 1.63.0 or later: settings.kubelet-device-plugins.nvidia.enabled = false) or move one to separate nodes", driver, res),
				})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].ExtendedResource < out[j].ExtendedResource
	})
	return out
}
