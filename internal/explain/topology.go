package explain

import (
	"context"
	"sort"
	"strings"

	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// Level kinds of a TopologyLevel.
const (
	LevelPreferred = "preferred"
	LevelRequired  = "required"
	// LevelAny is every node: the last domain of a unit with preferred
	// levels and no required one.
	LevelAny = "any"
)

// topologyReport lists where a unit with topology may go: the domains of
// its plan (topology.PlanFor, pinned where its members run, exactly as the
// decision tried them) level by level, each with what is free there and
// how many members fit — placement.Simulate restricted to that one domain,
// the scheduler's own placement. classes are the DeviceClasses the unit
// asks for. nil for a unit without topology or a decision that placed
// nothing (a wait).
func topologyReport(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, d decide.Decision, classes []string) (*TopologyReport, error) {
	pu := d.Unit
	if pu.Topology.IsZero() || len(pu.Members) == 0 {
		return nil, nil
	}
	tr := &TopologyReport{Constraint: pu.Topology.String()}
	tr.decided(d)
	plan := topology.PlanFor(snap, pu.Topology, pu.Running)
	if len(plan.Excluded) > 0 {
		tr.Excluded = (placement.Diagnosis{Reasons: plan.Excluded}).Top()
	}
	alloc := dra.New(snap, cache)
	var levels []*TopologyLevel
	byKey := map[string]*TopologyLevel{}
	for _, dom := range plan.Domains {
		u := pu
		u.Domains = []topology.Domain{dom}
		res, err := placement.Simulate(ctx, snap, alloc, u)
		if err != nil {
			return nil, err
		}
		dr := domainReport(ctx, snap, cache, dom, classes, placement.Judge(u, res))
		if tr.Largest == nil || dr.Fit > tr.Largest.Fit {
			tr.Largest = &dr
		}
		kind, key := levelOf(pu.Topology, dom)
		lv := byKey[kind+"/"+key]
		if lv == nil {
			lv = &TopologyLevel{Kind: kind, Key: key}
			byKey[kind+"/"+key] = lv
			levels = append(levels, lv)
		}
		lv.Domains = append(lv.Domains, dr)
	}
	for _, lv := range levels {
		// Most members first; equals stay in the order the scheduler
		// tries them (for a gang, the first admitted is its choice).
		sort.SliceStable(lv.Domains, func(i, j int) bool { return lv.Domains[i].Fit > lv.Domains[j].Fit })
		tr.Levels = append(tr.Levels, *lv)
	}
	return tr, nil
}

// decided records the domains the decision names: where it places the
// unit, or its best attempt and where a preemption would make room.
func (tr *TopologyReport) decided(d decide.Decision) {
	switch {
	case d.Outcome.Admitted:
		tr.PlacedIn = d.Result.Domain
	case d.Plan != nil:
		tr.PreemptIn, tr.BestAttempt = d.Plan.Placement.Domain, d.Result.Domain
	default:
		tr.BestAttempt = d.Result.Domain
	}
}

// levelOf names the level a domain of the plan belongs to: a preferred
// key, the required keys (and device attribute) together, or every node.
func levelOf(c topology.Constraint, d topology.Domain) (kind, key string) {
	if d.Level != "" {
		return LevelPreferred, d.Level
	}
	keys := append([]string(nil), c.Required...)
	if c.DeviceAttribute != "" {
		keys = append(keys, c.DeviceAttribute)
	}
	if len(keys) == 0 {
		return LevelAny, "all nodes"
	}
	return LevelRequired, strings.Join(keys, " + ")
}

// domainReport is what one domain holds for the unit: free devices of
// each class it asks for (only those of the domain's device value), free
// CPU and memory, and how many members fit (o, Judge's answer there).
func domainReport(ctx context.Context, snap *snapshot.Snapshot, cache *cel.Cache, d topology.Domain, classes []string, o placement.Outcome) DomainReport {
	dr := DomainReport{Name: d.String(), Nodes: len(d.Nodes), Fit: o.Fit, Admitted: o.Admitted}
	for _, ni := range d.Nodes {
		dr.FreeMilliCPU += ni.Allocatable.MilliCPU - ni.Requested.MilliCPU
		dr.FreeMemory += ni.Allocatable.Memory - ni.Requested.Memory
	}
	keep := d.KeepDevice()
	for _, class := range classes {
		c := dra.CountClassWhere(ctx, snap, cache, class, d.Nodes, keep)
		dr.Devices = append(dr.Devices, DomainDevices{Class: class, Free: c.Free(), Total: c.Total})
	}
	return dr
}
