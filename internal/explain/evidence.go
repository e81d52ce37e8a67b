package explain

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// extendedResources compares what the pending pods ask of extended
// resources with what nodes advertise (seed 003 steps 2 and 4).
func extendedResources(snap *snapshot.Snapshot, pending []*corev1.Pod) []ExtendedResource {
	if len(pending) == 0 {
		return nil
	}
	req := snapshot.PodRequests(pending[0], snap.Features)
	var out []ExtendedResource
	for name, per := range req.Scalar {
		er := ExtendedResource{Name: string(name), PerPod: per}
		if c := snap.ExtendedClass(name); c != nil {
			er.DeviceClass = c.Name
		}
		for _, ni := range snap.Nodes {
			a := ni.Allocatable.Scalar[name]
			if a > 0 {
				er.Nodes++
				er.Total += a
				er.Free += a - ni.Requested.Scalar[name]
			}
			if c, ok := ni.Node.Status.Capacity[name]; ok && c.Value() > a {
				er.NotAllocatable = append(er.NotAllocatable, fmt.Sprintf("%s: capacity %d, allocatable %d", ni.Node.Name, c.Value(), a))
			}
		}
		out = append(out, er)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// classReports describes every DeviceClass the pending members' unallocated
// claims ask for: devices per node, who holds them, taints, CEL errors.
func classReports(ctx context.Context, st *state, snap *snapshot.Snapshot, cache *cel.Cache, members []placement.Member, ext []ExtendedResource) []ClassReport {
	classes := map[string]bool{}
	for _, er := range ext {
		if er.DeviceClass != "" {
			classes[er.DeviceClass] = true
		}
	}
	for _, m := range members {
		for _, key := range m.Claims {
			c := snap.Claims[key]
			if c == nil || c.Status.Allocation != nil {
				continue
			}
			for _, class := range dra.Classes(&c.Spec) {
				classes[class] = true
			}
		}
	}
	owner := allocationOwners(st)
	usable := usableNodes(ctx, snap, members)
	var out []ClassReport
	for name := range classes {
		cr := classReport(ctx, snap, cache, name, owner)
		cr.Drivers, cr.NoSlices = missingDrivers(ctx, snap, cache, name, usable)
		out = append(out, cr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
	return out
}

func classReport(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, name string, owner map[string]string) ClassReport {
	cr := ClassReport{Class: name}
	class := snap.Classes[name]
	if class == nil {
		return cr
	}
	cr.Exists = true
	for _, sel := range class.Spec.Selectors {
		if sel.CEL != nil {
			if res := cache.GetOrCompile(sel.CEL.Expression); res.Error != nil {
				cr.CELErrors = append(cr.CELErrors, res.Error.Error())
			}
		}
	}
	count := dra.CountClass(ctx, snap, cache, name)
	cr.Total, cr.Allocated, cr.Partial = count.Total, count.Allocated, count.Partial
	for _, ni := range snap.Nodes {
		nd := NodeDevice{Node: ni.Node.Name}
		// All of the node's slices at once: a partitionable device's
		// counters and its partitions may be published in different slices.
		c := dra.CountClassIn(ctx, cache, class, ni.Slices, snap.Allocated)
		nd.Matching, nd.Allocated, nd.Partial = c.Total, c.Allocated, c.Partial
		for _, s := range ni.Slices {
			for _, d := range s.Spec.Devices {
				id := s.Spec.Pool.Name + "/" + d.Name
				if who, ok := owner[s.Spec.Driver+"/"+id]; ok && dra.ClassMatches(ctx, cache, class, s.Spec.Driver, d) {
					nd.To = append(nd.To, d.Name+"→"+who)
				}
				for _, t := range d.Taints {
					cr.Tainted = append(cr.Tainted, fmt.Sprintf("%s %s:%s=%s", id, t.Effect, t.Key, t.Value))
				}
			}
		}
		if nd.Matching > 0 {
			cr.PerNode = append(cr.PerNode, nd)
		}
	}
	return cr
}

// allocationOwners maps "driver/pool/device" to the unit holding it.
func allocationOwners(st *state) map[string]string {
	out := map[string]string{}
	for _, c := range st.claims {
		if c.Status.Allocation == nil {
			continue
		}
		who := "claim " + c.Namespace + "/" + c.Name
		if len(c.Status.ReservedFor) > 0 {
			if p := st.pod(c.Namespace, c.Status.ReservedFor[0].Name); p != nil {
				who = unitOf(p)
			}
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out[r.Driver+"/"+r.Pool+"/"+r.Device] = who
		}
	}
	return out
}

func unitOf(p *corev1.Pod) string {
	if g := podgroup.GroupOf(p); g != "" {
		return "PodGroup " + p.Namespace + "/" + g
	}
	return "pod " + p.Namespace + "/" + p.Name
}

// holders lists the units holding devices of the requested classes, with
// their priority and whether preemption could free them for u.
func holders(st *state, u *unit, classes []ClassReport) []Holder {
	counts := map[string]int{}
	prio := map[string]int32{}
	for _, c := range classes {
		for _, nd := range c.PerNode {
			for _, to := range nd.To {
				_, who, _ := strings.Cut(to, "→")
				counts[who]++
			}
		}
	}
	for _, p := range st.pods {
		who := unitOf(p)
		if _, ok := counts[who]; !ok {
			continue
		}
		pr := corev1helpers.PodPriority(p)
		if g := st.groups[p.Namespace+"/"+podgroup.GroupOf(p)]; g != nil {
			pr = st.groupPriority(g)
		}
		prio[who] = pr
	}
	var out []Holder
	for who, n := range counts {
		out = append(out, Holder{Unit: who, Priority: prio[who], Devices: n, Preemptible: prio[who] < u.priority && preemption.Allowed(u.Group, u.Members)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Unit < out[j].Unit })
	return out
}

func devicesOf(results []resourcev1.DeviceRequestAllocationResult) string {
	var out []string
	for _, r := range results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return strings.Join(out, ", ")
}

// usable are the nodes the pending members could use by the checks no
// device changes (their node selection, affinity and taints), and whether
// they select nodes explicitly (a node selector or a required node
// affinity).
type usable struct {
	nodes    map[string]bool
	explicit bool
}

// usableNodes is what usable says of members.
func usableNodes(ctx context.Context, snap *snapshot.Snapshot, members []placement.Member) usable {
	u := usable{nodes: map[string]bool{}}
	if len(members) == 0 {
		return u
	}
	for _, m := range members {
		if len(m.Pod.Spec.NodeSelector) > 0 || m.Pod.Spec.Affinity != nil && m.Pod.Spec.Affinity.NodeAffinity != nil &&
			m.Pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			u.explicit = true
		}
	}
	feasible, err := placement.Feasible(ctx, snap, placement.Unit{Members: members})
	if err != nil {
		return u
	}
	for n := range feasible {
		u.nodes[n] = true
	}
	return u
}

// missingDrivers names the drivers that publish devices of class and the
// usable nodes that publish no slice of any of them: those of an instance
// type where they do publish (a node pool whose driver is down on some
// nodes), or every usable one when the members select their nodes.
func missingDrivers(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, className string, u usable) (drivers, missing []string) {
	class := snap.Classes[className]
	if class == nil || len(u.nodes) == 0 {
		return nil, nil
	}
	served := map[string]bool{}
	withDriver := map[string]bool{} // instance types where a driver publishes
	for _, ni := range snap.Nodes {
		for _, s := range ni.Slices {
			for _, d := range s.Spec.Devices {
				if dra.ClassMatches(ctx, cache, class, s.Spec.Driver, d) {
					served[s.Spec.Driver] = true
					withDriver[ni.Node.Labels[corev1.LabelInstanceTypeStable]] = true
					break
				}
			}
		}
	}
	if len(served) == 0 {
		return nil, nil
	}
	for d := range served {
		drivers = append(drivers, d)
	}
	sort.Strings(drivers)
	for _, ni := range snap.Nodes {
		if !u.nodes[ni.Node.Name] {
			continue
		}
		if t := ni.Node.Labels[corev1.LabelInstanceTypeStable]; !u.explicit && (t == "" || !withDriver[t]) {
			continue
		}
		has := false
		for _, s := range ni.Slices {
			if served[s.Spec.Driver] {
				has = true
				break
			}
		}
		if !has {
			missing = append(missing, ni.Node.Name)
		}
	}
	sort.Strings(missing)
	return drivers, missing
}
