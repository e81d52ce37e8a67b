// Package preemption decides which running work to evict so that a unit
// that does not fit can be placed. It works on the cycle's snapshot and
// never calls the API server: the scheduler turns a Plan into evictions and
// a nomination.
//
// The search is cluster-wide, not node by node: a gang's members may land on
// any nodes, and DRA devices (node-local or not) are freed with the claims
// that hold them. Eviction comes in Candidates — a whole PodGroup when its
// disruptionMode is all, else one pod — and only Candidates of strictly lower
// priority than the preemptor are considered.
//
//	relevant lower-priority candidates, cheapest first
//	  │ remove the terminating ones (already going, cost nothing)
//	  │ remove all: does the unit fit? no → evict nothing
//	  │ binary search the shortest cheapest-first prefix that fits
//	  ▼ reprieve: put back the most valuable first, keeping each that is not needed
//	victims + the simulated placement (the nomination)
//
// A unit with required topology (or a device attribute) runs this search
// once per required domain, with only the candidates and nodes of that
// domain, and takes the cheapest plan (victims of lower priority, fewer
// budgets violated, fewer pods): its victims are never spread over domains
// the unit cannot use together.
//
// Cheapest means: lower priority, no PodDisruptionBudget violated, most
// recently started (least work lost), fewer pods, then name. Every "fits"
// is a placement.Simulate on the snapshot with the candidates' pods removed
// and the devices of their claims freed (a claim shared by several pods is
// freed only when all its users are removed).
package preemption
