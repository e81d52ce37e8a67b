package placement

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// searchBudget bounds the node tries (a fit check and, with devices, an
// allocator call) one search may spend. A try costs microseconds to tens
// of microseconds, so a search that runs out costs well under a second;
// small gangs (the property test's) are searched exhaustively within it.
const searchBudget = 20000

// reasonSearchBudget is how a unit's summary says the search ran out
// before it found a placement or proved there is none.
const reasonSearchBudget = "no placement found within the search budget; one may exist: the gang waits and is searched again when the cluster changes"

// search is a depth-first search with backtracking for a gang the greedy
// orders could not place: members are placed signature by signature; the
// members of one signature are interchangeable, so each is placed on a
// node at or after its predecessor's (combinations, not permutations), and
// once one member of a signature is left out the rest of it are too;
// nodes still untouched that look alike (same capacity, requests, free
// devices, labels and taints) are tried once. It is exhaustive within its
// budget.
//
// It works on the attempt's snapshot: what it places stays assumed (the
// attempt's undo stack rolls it back as for a greedy attempt).
type search struct {
	a      *attempt
	groups []*group
	// need is how many members must be placed (minCount less the bound).
	need   int
	budget int
	// placed is the path: the assignment of each member placed so far.
	placed []Assignment
	// touched counts the path's members on each node.
	touched map[string]int
	// classOf maps a node to its look-alike class (computed once).
	classOf map[string]string
}

// searchGang searches for a placement of at least need of unit's members;
// it returns the result (assignments stay assumed when found) and whether
// the budget ran out.
func (a *attempt) searchGang(groups []*group, need int) (Result, bool, error) {
	budget := a.unit.SearchBudget
	if budget <= 0 {
		budget = searchBudget
	}
	s := &search{a: a, groups: groups, need: need, budget: budget, touched: map[string]int{}, classOf: map[string]string{}}
	for _, g := range groups {
		for _, ni := range g.feasible {
			if _, ok := s.classOf[ni.Node.Name]; !ok {
				s.classOf[ni.Node.Name] = nodeClass(a.snap, ni)
			}
		}
	}
	found, err := s.dfs(0, 0, 0, 0)
	if err != nil {
		a.rollback()
		return Result{}, false, err
	}
	if !found {
		return Result{}, s.budget <= 0, nil
	}
	res := Result{Assignments: append([]Assignment(nil), s.placed...)}
	// The members the search left out: place what fits greedily beside it.
	in := map[int]bool{}
	for _, asg := range s.placed {
		in[s.memberIndex(asg)] = true
	}
	for _, g := range groups {
		g.reset()
		for _, mi := range g.members {
			if in[mi] {
				continue
			}
			asg, diag, err := a.placeMember(g, mi)
			if err != nil {
				a.rollback()
				return Result{}, false, err
			}
			if asg == nil {
				res.Unplaced = append(res.Unplaced, Failure{Pod: a.unit.Members[mi].Pod, Diagnosis: diag})
				continue
			}
			res.Assignments = append(res.Assignments, *asg)
		}
	}
	res.Placeable = len(res.Assignments)
	return res, false, nil
}

func (s *search) memberIndex(asg Assignment) int {
	for i, m := range s.a.unit.Members {
		if m.Pod == asg.Pod {
			return i
		}
	}
	return -1
}

// dfs places member k of groups[gi] on a node at index ≥ from of its
// feasible list, or leaves the rest of the group out; placed counts the
// members on the path. It reports whether need was reached.
func (s *search) dfs(gi, k, from, placed int) (bool, error) {
	if placed >= s.need {
		return true, nil
	}
	if gi == len(s.groups) || s.budget <= 0 {
		return false, nil
	}
	g := s.groups[gi]
	if k == len(g.members) {
		return s.dfs(gi+1, 0, 0, placed)
	}
	if placed+s.left(gi, k) < s.need {
		return false, nil
	}
	tried := map[string]bool{}
	for j := from; j < len(g.feasible) && s.budget > 0; j++ {
		ni := g.order.at(j)
		if s.touched[ni.Node.Name] == 0 {
			// Untouched look-alikes give the same subtree: try one.
			c := s.classOf[ni.Node.Name]
			if tried[c] {
				continue
			}
			tried[c] = true
		}
		s.budget--
		mark := s.a.j.mark()
		asg, err := s.a.placeOn(g, g.members[k], ni)
		if err != nil {
			return false, err
		}
		if asg == nil {
			continue
		}
		s.placed = append(s.placed, *asg)
		s.touched[ni.Node.Name]++
		ok, err := s.dfs(gi, k+1, j, placed+1)
		if err != nil || ok {
			return ok, err
		}
		s.touched[ni.Node.Name]--
		s.placed = s.placed[:len(s.placed)-1]
		s.a.rollbackTo(mark)
	}
	// Leave member k and the rest of its signature out.
	return s.dfs(gi+1, 0, 0, placed)
}

// left counts the members from member k of groups[gi] on.
func (s *search) left(gi, k int) int {
	n := len(s.groups[gi].members) - k
	for _, g := range s.groups[gi+1:] {
		n += len(g.members)
	}
	return n
}

// nodeClass is a node's look-alike key for the search: nodes with the same
// key, untouched by the path, are interchangeable for it.
func nodeClass(snap *snapshot.Snapshot, ni *snapshot.NodeInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|%v|%d|", ni.Allocatable, ni.Requested, ni.FreeDevices())
	keys := make([]string, 0, len(ni.Node.Labels))
	for k := range ni.Node.Labels {
		if k == "kubernetes.io/hostname" {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + ni.Node.Labels[k] + ",")
	}
	fmt.Fprintf(&b, "|%v|%v|%d", ni.Node.Spec.Taints, ni.Node.Spec.Unschedulable, len(ni.UsedPorts))
	for _, s := range ni.Slices {
		b.WriteString("|" + s.Spec.Driver)
		for _, d := range s.Spec.Devices {
			taken := snap.Allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name))
			fmt.Fprintf(&b, ",%s:%t:%v:%v:%v", d.Name, taken, d.Attributes, d.Capacity, d.Taints)
		}
	}
	return b.String()
}

// needsSearch reports whether the greedy orders may miss a placement that
// exists: the gang has several signatures, or its pods constrain one
// another (inter-pod affinity, anti-affinity, topology spread).
func needsSearch(groups []*group, unit Unit) bool {
	if !unit.Gang {
		return false
	}
	if len(groups) > 1 {
		return true
	}
	for _, m := range unit.Members {
		spec := m.Pod.Spec
		if len(spec.TopologySpreadConstraints) > 0 || spec.Affinity != nil && (spec.Affinity.PodAffinity != nil || spec.Affinity.PodAntiAffinity != nil) {
			return true
		}
	}
	return false
}

// mayHold is a necessary condition for need members to fit: the need
// smallest requests of CPU, memory and devices do not exceed what the
// groups' nodes have free. It spares the search units that cannot fit.
func mayHold(snap *snapshot.Snapshot, groups []*group, need int) bool {
	nodes := map[*snapshot.NodeInfo]bool{}
	var cpus, mems, devs []int64
	for _, g := range groups {
		for _, ni := range g.feasible {
			nodes[ni] = true
		}
		for range g.members {
			cpus, mems, devs = append(cpus, g.req.MilliCPU), append(mems, g.req.Memory), append(devs, int64(g.devices))
		}
	}
	var cpu, mem, dev int64
	for ni := range nodes {
		cpu += ni.Allocatable.MilliCPU - ni.Requested.MilliCPU
		mem += ni.Allocatable.Memory - ni.Requested.Memory
		dev += int64(ni.FreeDevices())
	}
	return smallest(cpus, need) <= cpu && smallest(mems, need) <= mem && (len(snap.GlobalSlices) > 0 || smallest(devs, need) <= dev)
}

// smallest sums the n smallest of vs.
func smallest(vs []int64, n int) int64 {
	slices.Sort(vs)
	var sum int64
	for i := 0; i < n && i < len(vs); i++ {
		sum += vs[i]
	}
	return sum
}
