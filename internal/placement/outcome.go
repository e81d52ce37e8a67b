package placement

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Outcome is what a placement result means for its unit: whether the unit
// is admitted — it binds what was placed — and which members stay pending.
// Judge is the only place this is computed: placement (which keeps or rolls
// back an attempt), decide.Decide (bind or not), preemption's simulation
// (does a set of victims make room), the scheduler's status messages and
// metrics, and explain all read an Outcome, so none of them can answer
// "did this unit fit?" differently.
type Outcome struct {
	// Admitted: bind Result.Assignments now. A gang is admitted when its
	// bound and placed members reach minCount, any other unit when it
	// placed a member. Members beyond what was placed stay pending and
	// join the running incarnation as they fit (Waiting).
	Admitted bool
	// Gang and MinCount are the unit's.
	Gang     bool
	MinCount int
	// Fit counts the members that count toward minCount with this result:
	// the bound ones plus those placed now (placed and rolled back for a
	// gang that is not admitted: the most one attempt could place).
	Fit int
	// Total counts every member, bound and pending.
	Total int
	// SearchExhausted: the placement search ran out of budget (a
	// placement may exist; Result.SearchExhausted).
	SearchExhausted bool
	// Domain is the topology domain of the placement (admitted), or of the
	// best attempt (not admitted); "" without topology. domainNodes are
	// its nodes (device counts in messages are the domain's).
	Domain      string
	domainNodes []*snapshot.NodeInfo
	// capacity is the unit's capacity types when they leave some out (its
	// device counts in messages are of the nodes it may use).
	capacity podgroup.CapacityTypes
	// Waiting are the pending members that stay pending, each with why:
	// those that found no node and, for a gang that is not admitted, every
	// other pending member too (their Diagnosis is empty: they wait for
	// their gang, not for a node of their own).
	Waiting []Failure
}

// Judge answers, for unit, what res means (see Outcome).
func Judge(unit Unit, res Result) Outcome {
	o := Outcome{
		Gang:     unit.Gang,
		MinCount: unit.MinCount,
		Fit:      unit.Bound + res.Placeable,
		Total:    unit.Bound + len(unit.Members),

		SearchExhausted: res.SearchExhausted,
		Domain:          res.Domain,
		domainNodes:     res.domainNodes,
	}
	if !unit.CapacityTypes.AllowsAll() {
		o.capacity = unit.CapacityTypes
	}
	placed := len(res.Assignments)
	o.Admitted = placed > 0 && (!unit.Gang || unit.Bound+placed >= unit.MinCount)
	o.Waiting = res.Unplaced
	if o.Admitted || len(res.Unplaced) == len(unit.Members) {
		return o
	}
	failed := make(map[*corev1.Pod]bool, len(res.Unplaced))
	for _, f := range res.Unplaced {
		failed[f.Pod] = true
	}
	o.Waiting = append([]Failure(nil), res.Unplaced...)
	for _, m := range unit.Members {
		if !failed[m.Pod] {
			o.Waiting = append(o.Waiting, Failure{Pod: m.Pod})
		}
	}
	return o
}

// Complete reports whether every pending member binds now.
func (o Outcome) Complete() bool { return o.Admitted && len(o.Waiting) == 0 }

// MinCountMet reports whether the members that count toward minCount
// (bound and placed) reach it: a gang that met it binds its further
// members one by one as they fit, like a basic group.
func (o Outcome) MinCountMet() bool { return !o.Gang || o.Fit >= o.MinCount }

// Sufficient is what a preemption must reach for the unit: a gang
// admitted (bound and placed members reach minCount, at least one placed),
// any other unit with every pending member placed.
func (o Outcome) Sufficient() bool {
	if o.Gang {
		return o.Admitted
	}
	return o.Complete()
}

// ForGang reports whether the member found a node but waits for its gang
// (Judge: a gang that is not admitted), rather than for a node of its own.
func (f Failure) ForGang() bool { return f.Diagnosis.Reasons == nil }
