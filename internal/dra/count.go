package dra

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// ClassCount is how many devices of a DeviceClass exist, how many of them
// are allocated, and how many of the others carry a taint that keeps
// pods off them (NoSchedule or NoExecute, in their slice or from a
// DeviceTaintRule), for messages like "6 devices, 4 in use, 1 tainted".
type ClassCount struct {
	Class     string
	Total     int
	Allocated int
	Tainted   int
}

// String is "6 devices, 4 in use" (", 1 tainted" when some are).
func (c ClassCount) String() string {
	s := fmt.Sprintf("%d devices, %d in use", c.Total, c.Allocated)
	if c.Tainted > 0 {
		s += fmt.Sprintf(", %d tainted", c.Tainted)
	}
	return s
}

// CountClass counts the devices in the snapshot that the class's selectors
// match. Devices whose selectors fail to evaluate are not counted.
func CountClass(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, className string) ClassCount {
	class := snap.Classes[className]
	if class == nil {
		return ClassCount{Class: className}
	}
	slices := append([]*resourcev1.ResourceSlice(nil), snap.GlobalSlices...)
	for _, ni := range snap.Nodes {
		slices = append(slices, ni.Slices...)
	}
	return CountClassIn(ctx, cache, class, slices, snap.Allocated)
}

// CountClassOn counts the devices of the class on nodes (their own
// slices), e.g. one topology domain's.
func CountClassOn(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, className string, nodes []*snapshot.NodeInfo) ClassCount {
	return CountClassWhere(ctx, snap, cache, className, nodes, nil)
}

// CountClassWhere counts the devices of the class on nodes that keep
// accepts (nil: every device), e.g. one topology domain's with its device
// filter (topology.Domain.KeepDevice).
func CountClassWhere(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, className string, nodes []*snapshot.NodeInfo, keep func(driver string, d *resourcev1.Device) bool) ClassCount {
	class := snap.Classes[className]
	if class == nil {
		return ClassCount{Class: className}
	}
	var slices []*resourcev1.ResourceSlice
	for _, ni := range nodes {
		slices = append(slices, ni.Slices...)
	}
	return countIn(ctx, cache, class, slices, snap.Allocated, keep)
}

// Free is how many devices pods can be given now: neither allocated nor
// tainted.
func (c ClassCount) Free() int { return c.Total - c.Allocated - c.Tainted }

// CountClassIn counts the devices of slices that class matches, and how many
// of them are in allocated (which may be nil).
func CountClassIn(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, slices []*resourcev1.ResourceSlice, allocated sets.Set[structured.DeviceID]) ClassCount {
	return countIn(ctx, cache, class, slices, allocated, nil)
}

func countIn(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, slices []*resourcev1.ResourceSlice, allocated sets.Set[structured.DeviceID], keep func(string, *resourcev1.Device) bool) ClassCount {
	out := ClassCount{Class: class.Name}
	for _, s := range slices {
		for i := range s.Spec.Devices {
			d := s.Spec.Devices[i]
			if keep != nil && !keep(s.Spec.Driver, &d) || !ClassMatches(ctx, cache, class, s.Spec.Driver, d) {
				continue
			}
			out.Total++
			switch {
			case allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)):
				out.Allocated++
			case keepsPodsOff(d.Taints):
				out.Tainted++
			}
		}
	}
	return out
}

// ClassMatches reports whether a device of driver satisfies every CEL
// selector of class; a selector that fails to compile or evaluate does not match.
func ClassMatches(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, driver string, d resourcev1.Device) bool {
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		res := cache.GetOrCompile(sel.CEL.Expression)
		if res.Error != nil {
			return false
		}
		ok, _, err := res.DeviceMatches(ctx, cel.Device{Driver: driver, Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// keepsPodsOff reports whether a device has a NoSchedule or NoExecute taint.
func keepsPodsOff(taints []resourcev1.DeviceTaint) bool {
	for _, t := range taints {
		if t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute {
			return true
		}
	}
	return false
}
