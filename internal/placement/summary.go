package placement

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Summary is the arithmetic users read first, shared by the scheduler's
// PodGroup condition and `lockstep explain`, e.g.
// "minCount 4 not satisfiable: at most 2 of 4 pods fit; 2 pods: no free device of class gpu.example.com (6 devices, 4 in use)",
// or, for a gang past minCount whose other members do not fit,
// "3 of 4 pods fit (minCount 2 met); 1 pod: …". It is "" when every member
// binds. o is Judge's answer for unit and res.
func Summary(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, o Outcome) string {
	if o.Complete() {
		return ""
	}
	head := fmt.Sprintf("%d of %d pods fit", o.Fit, o.Total)
	switch {
	case o.Gang && !o.MinCountMet() && o.SearchExhausted:
		head = fmt.Sprintf("minCount %d: "+reasonSearchBudget+"; the best placement found holds %d of %d pods", o.MinCount, o.Fit, o.Total)
	case o.Gang && !o.MinCountMet():
		head = fmt.Sprintf("minCount %d not satisfiable: at most %d of %d pods fit", o.MinCount, o.Fit, o.Total)
	case o.Gang:
		head += fmt.Sprintf(" (minCount %d met)", o.MinCount)
	}
	if o.Domain != "" && !o.Admitted {
		head += fmt.Sprintf(" in one topology domain (the best: %s)", o.Domain)
	}
	byReason := map[string]int{}
	// A class is counted once per summary, not once per waiting member:
	// counting runs every device through the class's selectors.
	counts := map[string]dra.ClassCount{}
	for _, f := range o.Waiting {
		if f.ForGang() {
			continue
		}
		byReason[mainReason(ctx, snap, cache, f.Diagnosis, o, counts)]++
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if byReason[reasons[i]] != byReason[reasons[j]] {
			return byReason[reasons[i]] > byReason[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := []string{head}
	for _, r := range reasons {
		noun := "pods"
		if byReason[r] == 1 {
			noun = "pod"
		}
		parts = append(parts, fmt.Sprintf("%d %s: %s", byReason[r], noun, r))
	}
	return strings.Join(parts, "; ")
}

// MainReason words the reason most nodes gave; a device shortage names the
// class with its arithmetic.
func MainReason(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, d Diagnosis) string {
	return mainReason(ctx, snap, cache, d, Outcome{}, map[string]dra.ClassCount{})
}

// mainReason is MainReason counting devices in o's domain, if it has one,
// with the class counts made so far for o.
func mainReason(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, d Diagnosis, o Outcome, counts map[string]dra.ClassCount) string {
	// Nodes outside the domain being tried say where the unit may not go,
	// not why it does not fit: the reason is what the domain's nodes say.
	top := slices.DeleteFunc(d.Top(), func(rc ReasonCount) bool { return strings.HasPrefix(rc.Reason, reasonOutsidePrefix) })
	if len(top) == 0 {
		top = d.Top()
	}
	if len(top) == 0 {
		return "no nodes"
	}
	if top[0].Reason == ReasonDevices && len(d.DeviceClasses) > 0 {
		class := d.DeviceClasses[0]
		nodes, where, all := o.domainNodes, "", o.Domain == ""
		if all {
			nodes = snap.Nodes
		} else {
			where = " in " + o.Domain
		}
		// Devices on nodes of a capacity type the unit may not use are no
		// room for it: counted only when its policy leaves nodes out here.
		if allowed := ofCapacity(nodes, o.capacity); len(allowed) < len(nodes) {
			nodes, where, all = allowed, where+" on "+o.capacity.String()+" capacity", false
		}
		c, ok := counts[class]
		if !ok {
			if all {
				c = dra.CountClass(ctx, snap, cache, class)
			} else {
				c = dra.CountClassOn(ctx, snap, cache, class, nodes)
			}
			counts[class] = c
		}
		return fmt.Sprintf("no free device of class %s%s (%s)", c.Class, where, c)
	}
	return d.String()
}

// ofCapacity are the nodes of a capacity type c allows (all of them
// without a policy).
func ofCapacity(nodes []*snapshot.NodeInfo, c podgroup.CapacityTypes) []*snapshot.NodeInfo {
	if c == nil {
		return nodes
	}
	out := make([]*snapshot.NodeInfo, 0, len(nodes))
	for _, ni := range nodes {
		if c.Allows(ni.CapacityType()) {
			out = append(out, ni)
		}
	}
	return out
}
