package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Demand is the least a flat unit's pending members ask of the nodes at
// once to be admitted: Need of them (its minCount less its bound members;
// 1 unless a gang) and, per resource, the sum of the Need smallest
// requests (Least; Least.Pods is Need). An extended resource a DeviceClass
// serves (DRA) is left out: its capacity is devices, not allocatable.
type Demand struct {
	Need  int
	Least snapshot.Resources
	// shapes are the pending members' distinct requests (a gang's are
	// mostly one), with how many ask each.
	shapes []reqShape
}

type reqShape struct {
	req snapshot.Resources
	n   int
}

// DemandOf is u's Demand on snap's nodes; false when u needs no member
// more or has fewer pending than it needs (it waits for them).
func DemandOf(snap *snapshot.Snapshot, u *podgroup.Unit) (Demand, bool) {
	need := 1
	if u.Gang() {
		need = u.MinCount() - u.Bound
	}
	if need <= 0 || len(u.Pending) < need {
		return Demand{}, false
	}
	d := Demand{Need: need}
	index := map[string]int{}
	for _, p := range u.Pending {
		req := snap.Requests(p)
		for name := range req.Scalar {
			if snap.ExtendedClass(name) != nil {
				delete(req.Scalar, name)
			}
		}
		key := fmt.Sprint(req.MilliCPU, req.Memory, req.EphemeralStorage, req.Scalar)
		if i, ok := index[key]; ok {
			d.shapes[i].n++
			continue
		}
		index[key] = len(d.shapes)
		d.shapes = append(d.shapes, reqShape{req: req, n: 1})
	}
	d.Least.Pods = int64(need)
	for _, dim := range d.dims() {
		if v := d.least(dim.get); v != 0 {
			dim.set(&d.Least, v)
		}
	}
	return d, true
}

// dimension is one resource of Resources: how to read, write and print it.
type dimension struct {
	name   corev1.ResourceName
	get    func(snapshot.Resources) int64
	set    func(*snapshot.Resources, int64)
	format func(int64) string
}

// dims are the resources the members ask, but pods: cpu, memory,
// ephemeral storage, then extended resources by name.
func (d Demand) dims() []dimension {
	bytes := func(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }
	out := []dimension{
		{corev1.ResourceCPU, func(r snapshot.Resources) int64 { return r.MilliCPU }, func(r *snapshot.Resources, v int64) { r.MilliCPU = v },
			func(v int64) string { return resource.NewMilliQuantity(v, resource.DecimalSI).String() }},
		{corev1.ResourceMemory, func(r snapshot.Resources) int64 { return r.Memory }, func(r *snapshot.Resources, v int64) { r.Memory = v }, bytes},
		{corev1.ResourceEphemeralStorage, func(r snapshot.Resources) int64 { return r.EphemeralStorage }, func(r *snapshot.Resources, v int64) { r.EphemeralStorage = v }, bytes},
	}
	var scalars []corev1.ResourceName
	for _, s := range d.shapes {
		for name := range s.req.Scalar {
			if !slices.Contains(scalars, name) {
				scalars = append(scalars, name)
			}
		}
	}
	slices.Sort(scalars)
	for _, name := range scalars {
		out = append(out, dimension{name, func(r snapshot.Resources) int64 { return r.Scalar[name] },
			func(r *snapshot.Resources, v int64) {
				if r.Scalar == nil {
					r.Scalar = map[corev1.ResourceName]int64{}
				}
				r.Scalar[name] = v
			}, func(v int64) string { return strconv.FormatInt(v, 10) }})
	}
	return out
}

// least is the sum of the Need smallest requests of one resource.
func (d Demand) least(get func(snapshot.Resources) int64) int64 {
	sorted := slices.Clone(d.shapes)
	slices.SortFunc(sorted, func(a, b reqShape) int { return cmp.Compare(get(a.req), get(b.req)) })
	var sum int64
	left := d.Need
	for _, s := range sorted {
		n := min(left, s.n)
		sum += int64(n) * get(s.req)
		if left -= n; left == 0 {
			break
		}
	}
	return sum
}

// MoreNodes is the fewest nodes of allocatable node that, added to nodes
// of allocatable total, could hold Least (a bound: the nodes' other
// filters may ask more); false when no count of them could (Least asks
// more of a resource than total has, and node has none of it).
func (d Demand) MoreNodes(total, node snapshot.Resources) (int, bool) {
	n := 1
	for _, dim := range append(d.dims(), dimension{name: corev1.ResourcePods, get: func(r snapshot.Resources) int64 { return r.Pods }}) {
		short := dim.get(d.Least) - dim.get(total)
		if short <= 0 {
			continue
		}
		per := dim.get(node)
		if per <= 0 {
			return 0, false
		}
		n = max(n, int((short+per-1)/per))
	}
	return n, true
}

// BeyondCapacity says why unit u cannot be admitted on snap's nodes even if
// nothing else ran on them ("" when it might): more members than all
// nodes allow pods, fewer of its pending members than it needs fit any
// node's allocatable, or the members it needs ask, for some resource,
// more than all nodes' allocatable together (Demand). Only capacity added
// or changed (a node, its allocatable) can then help it; pods ending
// cannot. It is a bound, not a placement: it reads allocatable only (no
// affinity, taints, devices or topology), so a unit it passes may still
// not fit, but one it stops never could.
func BeyondCapacity(snap *snapshot.Snapshot, u *podgroup.Unit) string {
	if len(snap.Nodes) == 0 {
		return ""
	}
	d, ok := DemandOf(snap, u)
	if !ok {
		return ""
	}
	total := TotalAllocatable(snap)
	if d.Least.Pods > total.Pods {
		return fmt.Sprintf("beyond what the nodes hold even empty: %d pods needed at once, the %d nodes allow %d in all", d.Need, len(snap.Nodes), total.Pods)
	}
	fitting := 0
	for _, s := range d.shapes {
		for _, ni := range snap.Nodes {
			if len(snapshot.Insufficient(ni.Allocatable, snapshot.Resources{}, s.req)) == 0 {
				fitting += s.n
				break
			}
		}
	}
	if fitting < d.Need {
		return fmt.Sprintf("beyond what the nodes hold even empty: %d of its pending pods fit any of the %d nodes' allocatable, %d needed at once", fitting, len(snap.Nodes), d.Need)
	}
	for _, dim := range d.dims() {
		if asked, have := dim.get(d.Least), dim.get(total); asked > have {
			return fmt.Sprintf("beyond what the nodes hold even empty: %d pods needed at once ask at least %s %s, the %d nodes have %s in all", d.Need, dim.format(asked), dim.name, len(snap.Nodes), dim.format(have))
		}
	}
	return ""
}

// TotalAllocatable is the sum of snap's nodes' allocatable.
func TotalAllocatable(snap *snapshot.Snapshot) snapshot.Resources {
	var total snapshot.Resources
	for _, ni := range snap.Nodes {
		total.Add(ni.Allocatable)
	}
	return total
}
