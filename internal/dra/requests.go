package dra

import (
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
)

// Demand is what one device request of a claim asks for — the one reading
// of a request that placement, simulate, audit, the webhook and explain
// share.
type Demand struct {
	// Classes are the DeviceClasses that may serve it: an exactly
	// request's one, a firstAvailable request's alternatives in order of
	// preference (Classes[0] is the first choice).
	Classes []string
	// Count is the devices the first choice asks for (1 when unset); 0
	// when it asks for All matching devices, a number only the allocator
	// knows.
	Count int64
	// All: the first choice asks for every matching device.
	All bool
	// Least is the fewest devices any alternative asks for (an All
	// alternative counts 0): a lower bound of what the request takes.
	Least int64
}

// Demands reads each device request of spec, in order.
func Demands(spec *resourcev1.ResourceClaimSpec) []Demand {
	out := make([]Demand, 0, len(spec.Devices.Requests))
	for _, r := range spec.Devices.Requests {
		switch {
		case r.Exactly != nil:
			n, all := count(r.Exactly.AllocationMode, r.Exactly.Count)
			out = append(out, Demand{Classes: []string{r.Exactly.DeviceClassName}, Count: n, All: all, Least: n})
		case len(r.FirstAvailable) > 0:
			d := Demand{Least: -1}
			for i, s := range r.FirstAvailable {
				n, all := count(s.AllocationMode, s.Count)
				d.Classes = append(d.Classes, s.DeviceClassName)
				if i == 0 {
					d.Count, d.All = n, all
				}
				if d.Least < 0 || n < d.Least {
					d.Least = n
				}
			}
			out = append(out, d)
		}
	}
	return out
}

// count is a request's device count: ExactCount's n (1 when unset), 0 for All.
func count(mode resourcev1.DeviceAllocationMode, n int64) (int64, bool) {
	if mode == resourcev1.DeviceAllocationModeAll {
		return 0, true
	}
	return max(n, 1), false
}

// Classes are every DeviceClass a request of spec may be served from
// (alternatives included), in order, each once.
func Classes(spec *resourcev1.ResourceClaimSpec) []string {
	var out []string
	for _, d := range Demands(spec) {
		for _, c := range d.Classes {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// LeastDevices is the fewest devices spec can be satisfied with: the sum
// of each request's Least (requests for All devices count 0). A lower
// bound for necessary-condition checks.
func LeastDevices(spec *resourcev1.ResourceClaimSpec) int64 {
	// Demands' Least, without building the demands: it runs per member
	// and node in placement's prechecks.
	var n int64
	for _, r := range spec.Devices.Requests {
		switch {
		case r.Exactly != nil:
			c, _ := count(r.Exactly.AllocationMode, r.Exactly.Count)
			n += c
		case len(r.FirstAvailable) > 0:
			least := int64(-1)
			for _, s := range r.FirstAvailable {
				if c, _ := count(s.AllocationMode, s.Count); least < 0 || c < least {
					least = c
				}
			}
			n += least
		}
	}
	return n
}
