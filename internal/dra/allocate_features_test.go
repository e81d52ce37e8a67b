package dra

import "testing"

// The allocator's features follow kube-scheduler 1.37's defaults.
func TestFeaturesAre137Defaults(t *testing.T) {
	on := map[string]bool{
		"AdminAccess": Features.AdminAccess, "PrioritizedList": Features.PrioritizedList,
		"PartitionableDevices": Features.PartitionableDevices, "DeviceTaints": Features.DeviceTaints,
		"ConsumableCapacity": Features.ConsumableCapacity, "DeviceBindingAndStatus": Features.DeviceBindingAndStatus,
	}
	for name, enabled := range on {
		if !enabled {
			t.Errorf("%s is on by default in 1.37 but off in Lockstep's allocator", name)
		}
	}
}
