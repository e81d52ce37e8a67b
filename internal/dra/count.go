package dra

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// ClassCount is how many devices of a DeviceClass exist and how many of them
// are allocated, for messages like "6 devices, 4 in use".
type ClassCount struct {
	Class     string
	Total     int
	Allocated int
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

// CountClassIn counts the devices of slices that class matches, and how many
// of them are in allocated (which may be nil).
func CountClassIn(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, slices []*resourcev1.ResourceSlice, allocated sets.Set[structured.DeviceID]) ClassCount {
	out := ClassCount{Class: class.Name}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if !ClassMatches(ctx, cache, class, s.Spec.Driver, d) {
				continue
			}
			out.Total++
			if allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
				out.Allocated++
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
