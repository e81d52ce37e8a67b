package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// Member is one unbound pod of a unit with the names of its claims, in
// pod.spec.resourceClaims order (template claims resolved through
// pod.status.resourceClaimStatuses).
type Member struct {
	Pod    *corev1.Pod
	Claims []types.NamespacedName
}

// Unit is what one cycle places.
type Unit struct {
	Members []Member
	// Bound members count toward MinCount.
	Bound int
	// MinCount: a gang needs Bound+placed ≥ MinCount. Ignored unless Gang.
	MinCount int
	Gang     bool
	// Topology is where the members must, and would rather, run: every
	// member placed shares one domain (topology.PlanFor) with the others
	// and with the running ones.
	Topology topology.Constraint
	// Running are the members already placed (bound, or being bound):
	// members placed after the unit's admission go where they run.
	Running []topology.Placed
	// SearchBudget bounds the node tries of the search for a placement the
	// greedy orders miss (0: searchBudget).
	SearchBudget int
	// CapacityTypes, when set, are the capacity types of the nodes its
	// members may use (a group's capacity-types policy; nil for a lone
	// pod: any node).
	CapacityTypes podgroup.CapacityTypes
	// Domains, when set, are the only domains the unit is tried in, in
	// order, instead of those its Topology plans (a preemption searching
	// one domain at a time).
	Domains []topology.Domain
	// Signatures, when set, remembers the members' signatures across the
	// unit's placements (a preemption search simulates one unit tens of
	// times, and its members' pods and claims are the same objects each
	// time): NewSignatures.
	Signatures *Signatures
}

// plan is the domains the unit is tried in.
func (u Unit) plan(snap *snapshot.Snapshot) topology.Plan {
	if len(u.Domains) > 0 {
		return topology.Plan{Domains: u.Domains, Excluded: map[string]int{}}
	}
	return topology.PlanFor(snap, u.Topology, u.Running)
}

// elastic reports whether the unit is a gang with more pending members
// than it needs: its domains differ in how many of them they hold.
func (u Unit) elastic() bool { return u.Gang && len(u.Members) > max(u.MinCount-u.Bound, 1) }

// constrained reports whether the unit is placed in domains.
func (u Unit) constrained() bool { return len(u.Domains) > 0 || !u.Topology.IsZero() }

// Assignment places one pod.
type Assignment struct {
	Pod  *corev1.Pod
	Node string
	// Claims are the pod's claims as they must be written: each has
	// status.allocation set (allocated now or before).
	Claims []*resourcev1.ResourceClaim
	// NewlyAllocated[i] reports whether Claims[i] was allocated by this cycle.
	NewlyAllocated []bool
	// Volumes, when set, are the pod's volumes assumed on Node: bound
	// (PreBind) before the pod, released (Unreserve) if it is not bound.
	Volumes snapshot.Reservation
	// Extended, when set, is the claim to create for the pod's extended
	// resources that Node gets from DRA (allocated, with its mappings).
	Extended *dra.ExtendedClaim
}

// Result of placing a unit.
type Result struct {
	// Assignments are empty when a gang could not reach MinCount.
	Assignments []Assignment
	// Unplaced pods with why they did not fit (for a failed gang: every
	// member, with the diagnosis of the best attempt).
	Unplaced []Failure
	// Placeable is the most members one attempt could place.
	Placeable int
	// Domain is the topology domain the assignments are in ("" without
	// topology), e.g. "zone=z1, rack=r3"; domainNodes are its nodes.
	Domain      string
	domainNodes []*snapshot.NodeInfo
	// SearchExhausted: a gang the greedy orders could not place was
	// searched until its budget ran out without finding a placement or
	// proving there is none (a placement may exist).
	SearchExhausted bool
}

// Failure explains why a pod was not placed.
type Failure struct {
	Pod       *corev1.Pod
	Diagnosis Diagnosis
}

// Diagnosis counts, per reason, the nodes that rejected a pod for that
// reason (the first failing check per node, like kube-scheduler).
type Diagnosis struct {
	Nodes   int
	Reasons map[string]int
	// DeviceClasses are the classes of the device requests that did not fit.
	DeviceClasses []string
}

func (d *Diagnosis) add(reason string, nodes int) {
	if d.Reasons == nil {
		d.Reasons = map[string]int{}
	}
	d.Reasons[reason] += nodes
}

// Top returns the reasons, most nodes first, ties by name.
func (d Diagnosis) Top() []ReasonCount {
	out := make([]ReasonCount, 0, len(d.Reasons))
	for r, n := range d.Reasons {
		out = append(out, ReasonCount{Reason: r, Nodes: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Nodes != out[j].Nodes {
			return out[i].Nodes > out[j].Nodes
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}

// String is "0/3 nodes are available: 3 Insufficient cpu, 1 node(s) had untolerated taint …".
func (d Diagnosis) String() string {
	var parts []string
	for _, rc := range d.Top() {
		parts = append(parts, fmt.Sprintf("%d %s", rc.Nodes, rc.Reason))
	}
	return fmt.Sprintf("0/%d nodes are available: %s", d.Nodes, strings.Join(parts, ", "))
}

// Causes are the reasons without their node counts, most nodes first:
// "Insufficient cpu, node(s) had untolerated taint {…}"; a device shortage
// names the class. Unlike String it does not change as capacity comes and
// goes, so a condition carrying it is rewritten only when the cause does.
func (d Diagnosis) Causes() string {
	var parts []string
	for _, rc := range d.Top() {
		r := rc.Reason
		if r == ReasonDevices && len(d.DeviceClasses) > 0 {
			r = "no free device of class " + strings.Join(d.DeviceClasses, ", ")
		}
		parts = append(parts, r)
	}
	if len(parts) == 0 {
		return "no node can take it"
	}
	return strings.Join(parts, ", ")
}

// ReasonCount is one reason and how many nodes failed it.
type ReasonCount struct {
	Reason string
	Nodes  int
}

// Reasons, worded as kube-scheduler words them where it has them.
const (
	ReasonUnschedulable    = "node(s) were unschedulable"
	ReasonNodeName         = "node(s) didn't match the requested node name"
	ReasonDeclaredFeatures = "node(s) didn't match Pod's required features"
	ReasonAffinity         = "node(s) didn't match Pod's node affinity/selector"
	ReasonPorts            = "node(s) didn't have free ports for the requested pod ports"
	ReasonClaimNode        = "node(s) cannot reach the devices already allocated to the pod's claims"
	ReasonDevices          = "node(s) had no free devices for the pod's claims"
	// ReasonAllocator prefixes the DRA allocator's reason for failing on
	// one node only (dra.NodeFailure: an invalid pool among its slices).
	ReasonAllocator        = "node(s) could not allocate the pod's claims: "
	ReasonClaimReserved    = "node(s) cannot take the pod: a claim it shares is already reserved for 256 pods, the most one ResourceClaim allows"
	reasonTaintPrefix      = "node(s) had untolerated taint "
	reasonOutsidePrefix    = "node(s) outside the topology domain "
	reasonOutsideDomainFmt = reasonOutsidePrefix + "%s being tried"
	reasonInsufficientFmt  = "Insufficient %s"
)
