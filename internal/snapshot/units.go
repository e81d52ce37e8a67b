package snapshot

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// unit is what FreeDevices counts: one device, or one partitionable device
// — a counter set of a pool (DRA partitionable devices) with every device
// that consumes from it, the device whole and its partitions (MIG). A 1g
// partition in use takes its GPU out of FreeDevices, and the GPU's other
// partitions are not counted as free GPUs.
type unit struct {
	driver, pool string
	// device is the device's name, or "" for a counter set.
	device, counterSet string
}

// unitOf is the unit a device belongs to: the counter set it consumes from
// first, or itself.
func unitOf(driver, pool string, d *resourcev1.Device) unit {
	if len(d.ConsumesCounters) > 0 {
		return unit{driver: driver, pool: pool, counterSet: d.ConsumesCounters[0].CounterSet}
	}
	return unit{driver: driver, pool: pool, device: d.Name}
}

// countUnits is how many units the slices hold.
func countUnits(slices []*resourcev1.ResourceSlice) int {
	seen := map[unit]bool{}
	for _, sl := range slices {
		for i := range sl.Spec.Devices {
			seen[unitOf(sl.Spec.Driver, sl.Spec.Pool.Name, &sl.Spec.Devices[i])] = true
		}
	}
	return len(seen)
}

// lookup finds a device in the node's own slices.
func (ni *NodeInfo) lookup(id structured.DeviceID) (unit, bool) {
	if ni == nil {
		return unit{}, false
	}
	driver, pool, dev := id.Driver.String(), id.Pool.String(), id.Device.String()
	for _, sl := range ni.Slices {
		if sl.Spec.Driver != driver || sl.Spec.Pool.Name != pool {
			continue
		}
		for i := range sl.Spec.Devices {
			if sl.Spec.Devices[i].Name == dev {
				return unitOf(driver, pool, &sl.Spec.Devices[i]), true
			}
		}
	}
	return unit{}, false
}

// hold counts an allocated device of the node (only those its slices list
// count: an allocation can outlive its device): its unit is used while any
// of its devices is allocated.
func (ni *NodeInfo) hold(id structured.DeviceID) {
	if u, ok := ni.lookup(id); ok {
		ni.holdUnit(u)
	}
}

func (ni *NodeInfo) holdUnit(u unit) {
	if ni.unitUse == nil {
		ni.unitUse = map[unit]int{}
	}
	if ni.unitUse[u] == 0 {
		ni.used++
	}
	ni.unitUse[u]++
}

// unhold undoes hold.
func (ni *NodeInfo) unhold(id structured.DeviceID) {
	u, ok := ni.lookup(id)
	if !ok || ni.unitUse[u] == 0 {
		return
	}
	ni.unitUse[u]--
	if ni.unitUse[u] == 0 {
		delete(ni.unitUse, u)
		ni.used--
	}
}
