package clusterspec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate reports every problem in the spec with its field path. It renders
// the spec, so template errors and duplicate names are caught here, before
// anything is started.
func Validate(c *Cluster) field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != "" && c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != "" && c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	if len(c.NodePools) == 0 {
		errs = append(errs, field.Required(field.NewPath("nodePools"), "at least one node pool"))
	}
	for i := range c.NodePools {
		errs = append(errs, validatePool(&c.NodePools[i], field.NewPath("nodePools").Index(i))...)
	}
	for i, dc := range c.DeviceClasses {
		p := field.NewPath("deviceClasses").Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(dc.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), dc.Name, msg))
		}
		if len(dc.Selectors) == 0 {
			errs = append(errs, field.Required(p.Child("selectors"), "at least one CEL expression"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	_, renderErrs := render(c)
	return renderErrs
}

func validatePool(np *NodePool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(np.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), np.Name, msg))
	}
	if np.Count < 1 {
		errs = append(errs, field.Invalid(p.Child("count"), np.Count, "must be at least 1"))
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if _, ok := np.Capacity[r]; !ok {
			errs = append(errs, field.Required(p.Child("capacity").Key(string(r)), "cpu, memory and pods are required"))
		}
	}
	for name, q := range np.Capacity {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("capacity").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	for i, t := range np.Taints {
		tp := p.Child("taints").Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect,
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
	}
	drivers := map[string]bool{}
	for i := range np.Devices {
		dp := p.Child("devices").Index(i)
		ds := &np.Devices[i]
		if drivers[ds.Driver] {
			errs = append(errs, field.Duplicate(dp.Child("driver"), ds.Driver))
		}
		drivers[ds.Driver] = true
		errs = append(errs, validateDeviceSet(ds, dp)...)
	}
	return errs
}

func validateDeviceSet(ds *DeviceSet, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(ds.Driver) {
		errs = append(errs, field.Invalid(p.Child("driver"), ds.Driver, msg))
	}
	if ds.Count < 1 {
		errs = append(errs, field.Invalid(p.Child("count"), ds.Count, "must be at least 1"))
	}
	for name, a := range ds.Attributes {
		ap := p.Child("attributes").Key(name)
		for _, msg := range validation.IsQualifiedName(name) {
			errs = append(errs, field.Invalid(ap, name, msg))
		}
		if n := a.count(); n != 1 {
			errs = append(errs, field.Invalid(ap, n, "exactly one of string, int, bool, version must be set"))
		}
	}
	for name := range ds.Capacity {
		for _, msg := range validation.IsQualifiedName(name) {
			errs = append(errs, field.Invalid(p.Child("capacity").Key(name), name, msg))
		}
	}
	return append(errs, validatePartitions(ds, p)...)
}

// validatePartitions checks a partitionable set: DNS-label counter names,
// partitions only with counters, each consuming only counters the set has.
func validatePartitions(ds *DeviceSet, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range ds.Counters {
		cp := p.Child("counters").Key(name)
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(cp, name, msg))
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(cp, q.String(), "must not be negative"))
		}
	}
	if len(ds.Partitions) > 0 && len(ds.Counters) == 0 {
		errs = append(errs, field.Required(p.Child("counters"), "partitions take their share of the device's counters: set counters"))
	}
	names := map[string]bool{}
	for i := range ds.Partitions {
		part := &ds.Partitions[i]
		pp := p.Child("partitions").Index(i)
		for _, msg := range validation.IsDNS1123Label(part.Name) {
			errs = append(errs, field.Invalid(pp.Child("name"), part.Name, msg))
		}
		if names[part.Name] {
			errs = append(errs, field.Duplicate(pp.Child("name"), part.Name))
		}
		names[part.Name] = true
		if part.Count < 1 {
			errs = append(errs, field.Invalid(pp.Child("count"), part.Count, "must be at least 1"))
		}
		if len(part.Consumes) == 0 {
			errs = append(errs, field.Required(pp.Child("consumes"), "what one partition takes of the device's counters"))
		}
		for name, q := range part.Consumes {
			if _, ok := ds.Counters[name]; !ok && len(ds.Counters) > 0 {
				errs = append(errs, field.NotSupported(pp.Child("consumes").Key(name), name, sortedKeys(ds.Counters)))
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(pp.Child("consumes").Key(name), q.String(), "must not be negative"))
			}
		}
		for name, a := range part.Attributes {
			if n := a.count(); n != 1 {
				errs = append(errs, field.Invalid(pp.Child("attributes").Key(name), n, "exactly one of string, int, bool, version must be set"))
			}
		}
	}
	return errs
}

func (a Attribute) count() int {
	n := 0
	for _, set := range []bool{a.String != nil, a.Int != nil, a.Bool != nil, a.Version != nil} {
		if set {
			n++
		}
	}
	return n
}

// errorf is fmt.Sprintf for field error details.
func errorf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
