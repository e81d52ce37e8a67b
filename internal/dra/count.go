package dra

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"
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
	out := ClassCount{Class: className}
	class := snap.Classes[className]
	if class == nil {
		return out
	}
	count := func(s *resourcev1.ResourceSlice) {
		for _, d := range s.Spec.Devices {
			if !classMatches(ctx, cache, class, s.Spec.Driver, d) {
				continue
			}
			out.Total++
			if snap.Allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
				out.Allocated++
			}
		}
	}
	for _, ni := range snap.Nodes {
		for _, s := range ni.Slices {
			count(s)
		}
	}
	for _, s := range snap.GlobalSlices {
		count(s)
	}
	return out
}

func classMatches(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, driver string, d resourcev1.Device) bool {
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
