package integrity

import (
	"slices"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
)

// taintIndex maps every tainted device to its taints, from ResourceSlices
// with DeviceTaintRules applied, and is kept current from the slice
// tracker's events: a verdict looks a device up instead of indexing every
// slice again. It is safe for concurrent use.
type taintIndex struct {
	mu sync.RWMutex
	// byDevice: for each device with taints, the taints each slice listing
	// it gives (one slice, unless its pool is being republished).
	byDevice map[structured.DeviceID]map[string][]resourcev1.DeviceTaint
	// bySlice: the devices with taints each slice lists, so an update or a
	// deletion replaces exactly what that slice said.
	bySlice map[string][]structured.DeviceID
}

func newTaintIndex() *taintIndex {
	return &taintIndex{byDevice: map[structured.DeviceID]map[string][]resourcev1.DeviceTaint{}, bySlice: map[string][]structured.DeviceID{}}
}

// forget forgets what a deleted slice said.
func (x *taintIndex) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if s, ok := obj.(*resourcev1.ResourceSlice); ok {
		x.mu.Lock()
		defer x.mu.Unlock()
		x.drop(s.Name)
	}
}

// set records what one slice says, replacing what it said before.
func (x *taintIndex) set(obj any) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.drop(s.Name)
	for _, d := range s.Spec.Devices {
		if len(d.Taints) == 0 {
			continue
		}
		id := structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)
		if x.byDevice[id] == nil {
			x.byDevice[id] = map[string][]resourcev1.DeviceTaint{}
		}
		x.byDevice[id][s.Name] = d.Taints
		x.bySlice[s.Name] = append(x.bySlice[s.Name], id)
	}
}

// drop forgets what one slice said; x.mu is held.
func (x *taintIndex) drop(slice string) {
	for _, id := range x.bySlice[slice] {
		delete(x.byDevice[id], slice)
		if len(x.byDevice[id]) == 0 {
			delete(x.byDevice, id)
		}
	}
	delete(x.bySlice, slice)
}

// taints are a device's taints; when two slices list it with taints, those
// of the slice whose name sorts first.
func (x *taintIndex) taints(id structured.DeviceID) []resourcev1.DeviceTaint {
	x.mu.RLock()
	defer x.mu.RUnlock()
	bySlice := x.byDevice[id]
	if len(bySlice) <= 1 {
		for _, t := range bySlice {
			return t
		}
		return nil
	}
	names := make([]string, 0, len(bySlice))
	for n := range bySlice {
		names = append(names, n)
	}
	slices.Sort(names)
	return bySlice[names[0]]
}
