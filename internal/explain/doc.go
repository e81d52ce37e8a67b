// Package explain answers "why is my gang pending?" for a PodGroup, a pod,
// or a job of any integrated kind. It walks the diagnosis order operators
// use (seed 003): the group's conditions and incarnation, its members, their
// claims, then the scheduler's own decision for the unit — decide.Decide on
// the view internal/cycle assembles, watched from the cluster the way the
// scheduler watches it (DeviceTaintRules applied, nominations rebuilt from
// status.nominatedNodeName) — and the evidence around it: devices per class
// and node, who holds them, what preemption would do, and, for a unit with
// topology, every domain of its plan (topology.PlanFor) with its free
// devices, CPU and memory and how many members fit there — the
// scheduler's placement simulated in that one domain.
//
// For a CompositePodGroup (RunTree) it explains the scheduling tree the
// group belongs to: the tree resolved from its root as the scheduler
// resolves it (podgroup.RootOf, podgroup.ResolveTree), the scheduler's
// decision for the root (decide.Decide of the tree) with the root's arithmetic
// (placement.TreeSummary), and each node drawn with its verdict. Any other
// target whose group hangs in a tree (a PodGroup with a parent, its pod,
// its job) is answered from that same tree decision (treeRun): the
// scheduler never decides a tree's group alone, so neither does explain.
//
// What explain cannot read as the scheduler does (DeviceTaintRules the user
// may not list) it says in Report.Notes. The scheduler's assumptions of
// bindings in flight, which only its process holds, are the one input
// explain does not have: for the moments a binding is being written, the
// two may differ.
package explain
