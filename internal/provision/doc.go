// Package provision computes the nodes a gang is missing and how to ask
// Karpenter for them as one unit.
//
// Karpenter provisions for pods one pod's needs at a time and knows
// nothing of gangs (kubernetes-sigs/karpenter#742), nor, by default, of
// their DRA device requests. Lockstep does: when a unit does not fit on
// the nodes that exist, Plan tries the offerings of the cluster's
// NodePools (instance type × zone × capacity type) as nodes that do not
// exist yet — each rendered with the devices its instance type brings —
// and asks the scheduler's own decision whether the unit would fit with
// them. The smallest set that fits, in one offering, is the request:
// NodeClaims created together (NodeClaims), all or nothing.
//
// The package is pure: reading NodePools and writing NodeClaims is the
// scheduler's (internal/scheduler/karpenter.go).
package provision
