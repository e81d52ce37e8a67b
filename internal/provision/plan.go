package provision

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// Fits reports whether the unit would fit with these nodes (and their
// ResourceSlices) added to the cluster, and if not, why.
type Fits func(nodes []*corev1.Node, slices []*resourcev1.ResourceSlice) (bool, string)

// Request is the nodes a unit is missing: Count nodes of one offering.
type Request struct {
	Offering Offering
	Count    int
}

// String is "2 nodes of gpu-8x in zone-a (on-demand) from NodePool gpu".
func (r Request) String() string {
	return Nodes(r.Count) + " of " + r.Offering.String()
}

// Result is what Plan found.
type Result struct {
	// Request is set when more nodes would make the unit fit.
	Request *Request
	// Why says, when no request makes it fit within the NodePools'
	// limits, what stops each offering (a limit, or what the decision
	// says with the most nodes tried).
	Why []string
}

// Plan is the smallest request of one offering that makes the unit fit,
// trying at most maxNodes nodes of each (a unit needs at most one node
// per member placed): the fewest nodes, and of those the first offering
// in order (NodePool weight, then name; instance types, zones and
// capacity types in their listed order). It never proposes more nodes
// than a NodePool's limits leave; an offering that would fit beyond them
// is named with the limit in Why.
func Plan(offerings []Offering, maxNodes int, fits Fits) Result {
	var res Result
	if len(offerings) == 0 {
		res.Why = []string{"no NodePool offers an instance type Lockstep knows of (karpenter.instanceTypes)"}
		return res
	}
	var best *Request
	for _, o := range offerings {
		limit := maxNodes
		if best != nil && best.Count-1 < limit {
			limit = best.Count - 1 // only fewer nodes improve on best
		}
		if limit < 1 {
			continue
		}
		n, why := smallest(o, limit, fits)
		if n == 0 {
			if best == nil {
				res.Why = append(res.Why, fmt.Sprintf("%s: %s", o, why))
			}
			continue
		}
		if over := o.NodePool.exceeds(o.InstanceType.Allocatable, n); over != "" {
			res.Why = append(res.Why, fmt.Sprintf("%s: would fit on %s, beyond NodePool %s's limits (%s)", describe(o), strings.Replace(Nodes(n), " ", " new ", 1), o.NodePool.Name, over))
			continue
		}
		best = &Request{Offering: o, Count: n}
	}
	if best != nil {
		res.Request, res.Why = best, nil
	}
	return res
}

// smallest is the fewest nodes of the offering, at most limit, with which
// the unit fits (0: none; why is the decision's reason at limit): counts
// double until one fits, then a binary search below it. The decision is
// monotone in the nodes added: a node more never makes a unit unfit.
func smallest(o Offering, limit int, fits Fits) (int, string) {
	return fewest(func(n int) ([]*corev1.Node, []*resourcev1.ResourceSlice, error) {
		objs, err := o.InstanceType.render(plannedPrefix(o), n, o.labels(), o.NodePool.Taints)
		if err != nil {
			return nil, nil, err
		}
		return objs.Nodes, objs.ResourceSlices, nil
	}, 1, limit, fits)
}

// fewest is the fewest nodes render makes, between from (a count below
// which the unit is known not to fit) and limit, with which the unit fits
// (0: none; why is the decision's reason at limit, or the bound when it
// is above limit). Counts double from the bound until one fits, then a
// binary search below it: a gang of 3,000 whose bound says 31 nodes tries
// 31 first, not 1, 2, 4 … each a decision of 3,000 pods.
func fewest(render func(n int) ([]*corev1.Node, []*resourcev1.ResourceSlice, error), from, limit int, fits Fits) (int, string) {
	try := func(n int) (bool, string) {
		nodes, slices, err := render(n)
		if err != nil {
			return false, err.Error()
		}
		return fits(nodes, slices)
	}
	from = max(from, 1)
	if from > limit {
		return 0, fmt.Sprintf("needs at least %s", Nodes(from))
	}
	lo, hi := from-1, 0 // lo does not fit; hi fits (0: none found yet)
	var why string
	for n := from; ; n *= 2 {
		if n > limit {
			n = limit
		}
		ok, reason := try(n)
		if ok {
			hi = n
			break
		}
		lo, why = n, reason
		if n == limit {
			return 0, why
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok, _ := try(mid); ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, ""
}

// PlannedPrefix is the name prefix of the nodes Plan tries: they exist
// only in the decision's memory.
const PlannedPrefix = "lockstep-planned"

func plannedPrefix(o Offering) string {
	r := strings.NewReplacer(".", "-", "_", "-", "/", "-")
	return strings.ToLower(r.Replace(fmt.Sprintf("%s-%s-%s-%s", PlannedPrefix, o.NodePool.Name, o.InstanceType.Name, o.Zone)))
}

// Nodes is "1 node" or "n nodes".
func Nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}
