package features

import "testing"

// Default follows kube-scheduler 1.37's gate defaults: every allocator
// feature it has on, and the request and placement behaviours on.
func TestDefaultIs137(t *testing.T) {
	f := Default()
	on := map[string]bool{
		"AdminAccess": f.Allocator.AdminAccess, "PrioritizedList": f.Allocator.PrioritizedList,
		"PartitionableDevices": f.Allocator.PartitionableDevices, "DeviceTaints": f.Allocator.DeviceTaints,
		"ConsumableCapacity": f.Allocator.ConsumableCapacity, "DeviceBindingAndStatus": f.Allocator.DeviceBindingAndStatus,
		"InPlacePodVerticalScaling": f.InPlacePodVerticalScaling, "PodLevelResources": f.PodLevelResources,
		"DRAExtendedResource": f.DRAExtendedResource, "NodeDeclaredFeatures": f.NodeDeclaredFeatures,
	}
	for name, enabled := range on {
		if !enabled {
			t.Errorf("%s is on by default in 1.37 but off in Features.Default", name)
		}
	}
}
