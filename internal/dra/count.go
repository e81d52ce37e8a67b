package dra

import (
	"context"
	"fmt"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// ClassCount is how many devices of a DeviceClass exist, how many of them
// are in use, and how many of the others carry a taint that keeps pods off
// them (NoSchedule or NoExecute, in their slice or from a DeviceTaintRule),
// for messages like "6 devices, 4 in use, 1 tainted".
//
// A partitionable device (DRA partitionable devices: a counter set of its
// pool, and the devices consuming from it — a GPU whole and its MIG
// partitions) counts once, by its capacity, however many of its partitions
// the class matches: in use when a counter of its set is used up, partly in
// use when some of its counters are consumed (a 1g partition allocated: no
// whole GPU fits there any more, another 1g may), free when none is. A MIG
// partition is not a GPU.
type ClassCount struct {
	Class     string
	Total     int
	Allocated int
	// Partial are partitionable devices partly in use.
	Partial int
	Tainted int
}

// String is "6 devices, 4 in use" (", 1 partly in use (partitions)" and
// ", 1 tainted" when some are).
func (c ClassCount) String() string {
	s := fmt.Sprintf("%d devices, %d in use", c.Total, c.Allocated)
	if c.Partial > 0 {
		s += fmt.Sprintf(", %d partly in use (partitions)", c.Partial)
	}
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

// Free is how many devices pods can be given whole now: neither allocated,
// partly in use (a partitionable device with some of its counters consumed)
// nor tainted.
func (c ClassCount) Free() int { return c.Total - c.Allocated - c.Partial - c.Tainted }

// CountClassIn counts the devices of slices that class matches, and how many
// of them are in allocated (which may be nil). The counters of a
// partitionable device are those its pool's slices among slices publish, and
// what the allocated devices among them consume.
func CountClassIn(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, slices []*resourcev1.ResourceSlice, allocated sets.Set[structured.DeviceID]) ClassCount {
	return countIn(ctx, cache, class, slices, allocated, nil)
}

func countIn(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, slices []*resourcev1.ResourceSlice, allocated sets.Set[structured.DeviceID], keep func(string, *resourcev1.Device) bool) ClassCount {
	out := ClassCount{Class: class.Name}
	counters := countersOf(slices, allocated)
	// partitioned: the counter sets matching devices consume from, and
	// whether every one of those devices is tainted.
	partitioned := map[counterSetKey]bool{}
	for _, s := range slices {
		ids := snapshot.DevicesOf(s)
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if keep != nil && !keep(s.Spec.Driver, d) || !matches.of(ctx, cache, class, s, d) {
				continue
			}
			if k, ok := counters.setOf(s, d); ok {
				tainted, seen := partitioned[k]
				partitioned[k] = keepsPodsOff(d.Taints) && (tainted || !seen)
				continue
			}
			out.Total++
			switch {
			case allocated.Has(ids.ID(d.Name)):
				out.Allocated++
			case keepsPodsOff(d.Taints):
				out.Tainted++
			}
		}
	}
	for k, tainted := range partitioned {
		out.Total++
		switch counters.use(k) {
		case usedUp:
			out.Allocated++
		case partly:
			out.Partial++
		default:
			if tainted {
				out.Tainted++
			}
		}
	}
	return out
}

// counterSetKey names a counter set: sets are named per pool.
type counterSetKey struct{ driver, pool, set string }

// counterUse is what the allocated devices consume of each counter set.
type counterUse struct {
	capacity map[counterSetKey]map[string]resource.Quantity
	consumed map[counterSetKey]map[string]resource.Quantity
}

// countersOf reads the counter sets the slices publish and adds up what
// their allocated devices consume.
func countersOf(slices []*resourcev1.ResourceSlice, allocated sets.Set[structured.DeviceID]) counterUse {
	u := counterUse{capacity: map[counterSetKey]map[string]resource.Quantity{}, consumed: map[counterSetKey]map[string]resource.Quantity{}}
	for _, s := range slices {
		for _, cs := range s.Spec.SharedCounters {
			k := counterSetKey{s.Spec.Driver, s.Spec.Pool.Name, cs.Name}
			u.capacity[k] = map[string]resource.Quantity{}
			for name, c := range cs.Counters {
				u.capacity[k][name] = c.Value
			}
		}
	}
	for _, s := range slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if len(d.ConsumesCounters) == 0 || !allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
				continue
			}
			for _, c := range d.ConsumesCounters {
				k := counterSetKey{s.Spec.Driver, s.Spec.Pool.Name, c.CounterSet}
				if u.consumed[k] == nil {
					u.consumed[k] = map[string]resource.Quantity{}
				}
				for name, q := range c.Counters {
					sum := u.consumed[k][name]
					sum.Add(q.Value)
					u.consumed[k][name] = sum
				}
			}
		}
	}
	return u
}

// setOf is the counter set a device consumes from first, when the slices
// publish it (a device consuming from a set not published counts alone).
func (u counterUse) setOf(s *resourcev1.ResourceSlice, d *resourcev1.Device) (counterSetKey, bool) {
	if len(d.ConsumesCounters) == 0 {
		return counterSetKey{}, false
	}
	k := counterSetKey{s.Spec.Driver, s.Spec.Pool.Name, d.ConsumesCounters[0].CounterSet}
	_, ok := u.capacity[k]
	return k, ok
}

type setUse int

const (
	untouched setUse = iota
	partly
	usedUp
)

// use says how much of a counter set is consumed: used up when some
// counter has nothing left, partly when some is consumed.
func (u counterUse) use(k counterSetKey) setUse {
	consumed := u.consumed[k]
	if len(consumed) == 0 {
		return untouched
	}
	state := untouched
	for name, c := range consumed {
		if c.IsZero() {
			continue
		}
		state = partly
		if capacity, ok := u.capacity[k][name]; ok && c.Cmp(capacity) >= 0 {
			return usedUp
		}
	}
	return state
}

// ClassMatches reports whether a device of driver satisfies every CEL
// selector of class; a selector that fails to compile or evaluate does not match.
func ClassMatches(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, driver string, d resourcev1.Device) bool {
	ok, _ := classMatches(ctx, cache, class, driver, d)
	return ok
}

// classMatches is ClassMatches, and whether the answer is the device's and
// the class's own (not an evaluation cut short by ctx).
func classMatches(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, driver string, d resourcev1.Device) (matches, final bool) {
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		res := cache.GetOrCompile(sel.CEL.Expression)
		if res.Error != nil {
			return false, true
		}
		ok, _, err := res.DeviceMatches(ctx, cel.Device{Driver: driver, Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil {
			return false, ctx.Err() == nil
		}
		if !ok {
			return false, true
		}
	}
	return true, true
}

// matchMemoLimit bounds the answers matches remembers: past it, it
// forgets them all (a cluster of 5,000 nodes × 8 GPUs and a few classes
// stays well within it).
const matchMemoLimit = 1 << 18

// matches remembers ClassMatches' answers by class and device object.
// Counting a class (an unschedulable unit's message, the domain metrics)
// runs every device of the cluster through the class's selectors, on
// objects that do not change between counts: snapshot objects are
// replaced, never changed in place, so the same class and device objects
// give the same answer; the memory holds them, so their addresses are not
// reused while it remembers them.
var matches = &matchMemo{known: map[matchKey]bool{}}

type matchKey struct {
	class  *resourcev1.DeviceClass
	slice  *resourcev1.ResourceSlice
	device *resourcev1.Device
}

type matchMemo struct {
	mu    sync.Mutex
	known map[matchKey]bool
}

// of is ClassMatches for device d of slice s, remembered.
func (m *matchMemo) of(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, s *resourcev1.ResourceSlice, d *resourcev1.Device) bool {
	k := matchKey{class, s, d}
	m.mu.Lock()
	ok, known := m.known[k]
	m.mu.Unlock()
	if known {
		return ok
	}
	ok, final := classMatches(ctx, cache, class, s.Spec.Driver, *d)
	if !final {
		return ok
	}
	m.mu.Lock()
	if len(m.known) >= matchMemoLimit {
		clear(m.known)
	}
	m.known[k] = ok
	m.mu.Unlock()
	return ok
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
