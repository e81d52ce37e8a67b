package dra

import "testing"

// The allocator's features follow kube-scheduler 1.37's defaults, less
// device binding conditions, which Lockstep refuses instead of waiting for.
func TestFeaturesAre137Defaults(t *testing.T) {
	on := map[string]bool{
		"AdminAccess": Features.AdminAccess, "PrioritizedList": Features.PrioritizedList,
		"PartitionableDevices": Features.PartitionableDevices, "DeviceTaints": Features.DeviceTaints,
		"ConsumableCapacity": Features.ConsumableCapacity,
	}
	for name, enabled := range on {
		if !enabled {
			t.Errorf("%s is on by default in 1.37 but off in Lockstep's allocator", name)
		}
	}
	if Features.DeviceBindingAndStatus {
		t.Errorf("binding conditions are allocated, but the binder does not wait for them: %+v", Features)
	}
}
