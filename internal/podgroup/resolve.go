package podgroup

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Unit is a PodGroup (or a lone pod) resolved against its pods: what the
// scheduler places in one cycle and what explain explains. The scheduler,
// explain and the benchmarks resolve units only through Resolve and
// ResolvePod, so they cannot disagree on who is a member, who counts as
// bound, or why a unit waits.
type Unit struct {
	// Group is nil for a lone pod, and for pods naming a group that does
	// not exist (then Waiting says so).
	Group *lockv1.PodGroup
	// Pods are every Lockstep pod of the unit the group admits; Members
	// those of them that can count toward minCount (bound or assumed,
	// gated, pending — not those that ended or left the incarnation).
	Pods, Members []*corev1.Pod
	// Pending are the members to place now (not gated), by name; in no
	// order while a gang has fewer than minCount members (none is placed).
	Pending []*corev1.Pod
	// Bound counts the members that count toward minCount without being
	// placed now: bound and staying, finished, or placed by the scheduler
	// and being bound (assumed).
	Bound int
	// Placed are the bound members holding a node (bound and staying, or
	// assumed) with that node: where the unit runs (topology pins its
	// later members there).
	Placed []Placed
	// Gated counts pending members that still have scheduling gates;
	// Gates are those gates' names, sorted (e.g. Kueue's
	// kueue.x-k8s.io/admission, held until it admits the workload).
	Gated int
	Gates []string
	// queues are the Kueue LocalQueues gated members name
	// (KueueQueueLabel), sorted.
	queues []string
	// Waiting explains why the unit cannot be attempted yet ("" if it can);
	// WaitReason is the PodGroup condition reason for it ("" means
	// lockstep's WaitingForPods).
	Waiting, WaitReason string
}

// MinCount is the members the unit needs at once (1 unless a gang).
func (u *Unit) MinCount() int { return MinCount(u.Group) }

// Gang reports whether the unit is placed all or nothing.
func (u *Unit) Gang() bool { return IsGang(u.Group) }

// Assumed reports whether the scheduler placed a pending pod and is
// binding it (its binding not yet seen), and on which node: it counts as
// bound, and is not placed again. nil means none is.
type Assumed func(*corev1.Pod) (node string, ok bool)

// Placed is a member that holds a node.
type Placed struct {
	Pod  *corev1.Pod
	Node string
}

func assumedNode(assumed Assumed, p *corev1.Pod) (string, bool) {
	if assumed == nil {
		return "", false
	}
	return assumed(p)
}

// ResolvePod is a lone pod's unit: one member, pending unless gated,
// bound or assumed.
func ResolvePod(p *corev1.Pod, assumed Assumed, opts ...Option) *Unit {
	o := resolveOptions(opts)
	u := &Unit{Pods: []*corev1.Pod{p}, Members: []*corev1.Pod{p}}
	node, isAssumed := assumedNode(assumed, p)
	switch {
	case !Pending(p) || isAssumed:
		u.Bound = 1
		if !isAssumed {
			node = p.Spec.NodeName
		}
		if node != "" && !Terminal(p) {
			u.Placed = []Placed{{Pod: p, Node: node}}
		}
	case Gated(p):
		u.Gated = 1
		u.addGates(p)
		u.Waiting, u.WaitReason = u.gatedBy(p.Namespace, o)+" ("+u.GateList()+"): a gated pod is not scheduled until its last gate is removed", lockv1.PodGroupReasonSchedulingGated
	default:
		u.Pending = []*corev1.Pod{p}
	}
	return u
}

// Resolve is the unit of group ns/name (pg nil when it does not exist)
// from the pods that name it: its members, which of them count as bound,
// which are to be placed, and why it waits, if it does.
func Resolve(pg *lockv1.PodGroup, ns, name string, pods []*corev1.Pod, assumed Assumed, opts ...Option) *Unit {
	o := resolveOptions(opts)
	u := &Unit{Group: pg}
	var inc *lockv1.PodGroupIncarnation
	if pg != nil {
		inc = pg.Status.Incarnation
	}
	admits := admitter(pg)
	for _, p := range pods {
		if p.Namespace != ns || GroupOf(p) != name || !Ours(p) || !admits(p) {
			continue
		}
		u.Pods = append(u.Pods, p)
		node, isAssumed := assumedNode(assumed, p)
		switch {
		case Holds(p, inc) || Pending(p) && isAssumed:
			u.Bound++
			if isAssumed {
				u.Placed = append(u.Placed, Placed{Pod: p, Node: node})
			} else if Active(p) {
				u.Placed = append(u.Placed, Placed{Pod: p, Node: p.Spec.NodeName})
			}
		case Pending(p) && Gated(p):
			u.Gated++
			u.addGates(p)
		case Pending(p):
			u.Pending = append(u.Pending, p)
		default:
			continue
		}
		u.Members = append(u.Members, p)
	}
	have := u.Bound + len(u.Pending)
	if !u.Gang() || have >= u.MinCount() || pg == nil {
		// In name order; not while a gang waits for its members: it is
		// resolved again as each one arrives, and none is placed.
		slices.SortFunc(u.Pending, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	}
	switch {
	case pg == nil:
		u.Waiting = fmt.Sprintf("PodGroup %s/%s does not exist yet; its pods wait for it", ns, name)
	case len(pg.Spec.ResourceClaims) > 0:
		// Never ignored silently: the webhook refuses new groups with them;
		// one created before (or without the webhook) waits, saying why.
		u.Waiting = "spec.resourceClaims (claims reserved for the whole PodGroup) is not supported by Lockstep: recreate the group without it and give each pod its own claim from a ResourceClaimTemplate, or share one ResourceClaim through the pods' spec.resourceClaims (at most 256 pods per claim)"
	case u.Gang() && have < u.MinCount() && u.Gated > 0:
		// The whole gang waits: placing the ungated members alone would
		// hold their nodes and devices below minCount.
		u.WaitReason = lockv1.PodGroupReasonSchedulingGated
		u.Waiting = fmt.Sprintf("%s: %d members are gated (%s); none is placed until minCount %d are ungated", u.gatedBy(ns, o), u.Gated, u.GateList(), u.MinCount())
	case u.Gang() && have < u.MinCount():
		// No count in the message: it would change (and be written) with
		// every member created; explain and `get podgroups` show the count.
		u.Waiting = fmt.Sprintf("waiting for pods: fewer than minCount %d members exist; none is placed until %d do", u.MinCount(), u.MinCount())
	case len(u.Pending) == 0 && u.Gated > 0:
		// Nothing to place but members held by gates (Kueue holds a pod
		// group this way until it admits it): say so, rather than nothing.
		u.WaitReason = lockv1.PodGroupReasonSchedulingGated
		u.Waiting = fmt.Sprintf("%s: %d members are gated (%s); a gated pod is not scheduled until its last gate is removed", u.gatedBy(ns, o), u.Gated, u.GateList())
	}
	return u
}

// addGates adds a gated member's gates to Gates, and the Kueue queue it
// names when Kueue's admission gate holds it.
func (u *Unit) addGates(p *corev1.Pod) {
	for _, g := range p.Spec.SchedulingGates {
		if i, found := slices.BinarySearch(u.Gates, g.Name); !found {
			u.Gates = slices.Insert(u.Gates, i, g.Name)
		}
		if q := p.Labels[KueueQueueLabel]; g.Name == KueueAdmissionGate && q != "" {
			if i, found := slices.BinarySearch(u.queues, q); !found {
				u.queues = slices.Insert(u.queues, i, q)
			}
		}
	}
}

// GateList names the members' gates for a message:
// "spec.schedulingGates: a, b".
func (u *Unit) GateList() string {
	if u == nil || len(u.Gates) == 0 {
		return "spec.schedulingGates"
	}
	return "spec.schedulingGates: " + strings.Join(u.Gates, ", ")
}
