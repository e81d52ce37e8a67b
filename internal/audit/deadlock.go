package audit

import (
	"sort"
)

// findDeadlocks finds the workloads partial now that wait on each other:
// an edge a → b when a's unschedulable needed pods ask for a resource b
// holds; every cycle (a strongly connected set of two or more) is a
// deadlock — none of them can run until another gives up what it holds.
//
// It compares resources by name across the cluster, not node by node: a
// pod kept off by affinity or taints, not by what the others hold, can
// make a cycle that is not one.
func findDeadlocks(as []*analysis) []Deadlock {
	var nodes []*analysis
	for _, a := range as {
		if a.partialNow && len(a.last.held) > 0 {
			nodes = append(nodes, a)
		}
	}
	edges := map[*analysis][]*analysis{}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b && len(shared(a.needs, b.last.held)) > 0 {
				edges[a] = append(edges[a], b)
			}
		}
	}
	var out []Deadlock
	for _, scc := range components(nodes, edges) {
		if len(scc) >= 2 {
			out = append(out, deadlockOf(scc, edges))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Workloads[0] < out[j].Workloads[0] })
	return out
}

// deadlockOf marks the workloads of a cycle deadlocked, each waiting for
// those of the cycle it has an edge to, and describes the cycle.
func deadlockOf(scc []*analysis, edges map[*analysis][]*analysis) Deadlock {
	in := map[*analysis]bool{}
	for _, a := range scc {
		in[a] = true
	}
	d := Deadlock{Held: map[string]int64{}}
	resources := map[string]bool{}
	for _, a := range scc {
		a.deadlocked = true
		d.Workloads = append(d.Workloads, a.w.id())
		for k, v := range a.last.held {
			d.Held[k] += v
		}
		for _, b := range edges[a] {
			if !in[b] {
				continue
			}
			a.waitsFor = append(a.waitsFor, b.w.id())
			for _, r := range shared(a.needs, b.last.held) {
				resources[r] = true
			}
		}
		sort.Strings(a.waitsFor)
	}
	sort.Strings(d.Workloads)
	for r := range resources {
		d.Resources = append(d.Resources, r)
	}
	sort.Strings(d.Resources)
	return d
}

// shared are the resources needs asks for that held has.
func shared(needs, held devices) []string {
	var out []string
	for _, r := range needs.keys() {
		if held[r] > 0 {
			out = append(out, r)
		}
	}
	return out
}

// components are the strongly connected components of the graph
// (Tarjan's algorithm).
func components(nodes []*analysis, edges map[*analysis][]*analysis) [][]*analysis {
	index := map[*analysis]int{}
	low := map[*analysis]int{}
	onStack := map[*analysis]bool{}
	var stack []*analysis
	var out [][]*analysis
	next := 0
	var visit func(a *analysis)
	visit = func(a *analysis) {
		index[a], low[a] = next, next
		next++
		stack = append(stack, a)
		onStack[a] = true
		for _, b := range edges[a] {
			if _, seen := index[b]; !seen {
				visit(b)
				low[a] = min(low[a], low[b])
			} else if onStack[b] {
				low[a] = min(low[a], index[b])
			}
		}
		if low[a] != index[a] {
			return
		}
		var scc []*analysis
		for {
			b := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[b] = false
			scc = append(scc, b)
			if b == a {
				break
			}
		}
		out = append(out, scc)
	}
	for _, a := range nodes {
		if _, seen := index[a]; !seen {
			visit(a)
		}
	}
	return out
}
