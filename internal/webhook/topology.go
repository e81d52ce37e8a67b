package webhook

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// topologyView is what the topology warnings read: the cached node labels
// and device inventory (nil: no warning of that kind).
type topologyView struct {
	Nodes   *nodeLabels
	Devices *deviceIndex
}

// topologyWarnings warns about topology a group, a tree's
// CompositePodGroup or a job names (what: "group", "tree", "job") that
// nothing in the cluster carries: a required or preferred key no node has
// (required, it cannot be placed until nodes are labelled; preferred, it
// falls back to its next level), and a device attribute no device
// publishes. pg holds the topology (a job's or a CompositePodGroup's as a
// PodGroup would); requiredAt is where its i-th required key is written.
// It reads the cached views only, never the API server.
func (v topologyView) topologyWarnings(what string, pg *lockv1.PodGroup, requiredAt func(int) *field.Path) admission.Warnings {
	var out admission.Warnings
	annotations := field.NewPath("metadata", "annotations")
	if v.Nodes != nil {
		for i, key := range podgroup.TopologyKeys(pg) {
			if v.Nodes.carried(key) == 0 {
				out = append(out, fmt.Sprintf("%s: no node carries the label %q: the %s cannot be placed until nodes are labelled %s=<domain>; check the key's spelling (`lockstep preflight` lists the topology keys nodes carry)", requiredAt(i), key, what, key))
			}
		}
		for _, key := range podgroup.PreferredTopology(pg) {
			if v.Nodes.carried(key) == 0 {
				out = append(out, fmt.Sprintf("%s: no node carries the label %q: this preferred level is never met, the %s is placed at its next level; check the key's spelling (`lockstep preflight` lists the topology keys nodes carry)", annotations.Key(lockv1.PreferredTopologyAnnotation), key, what))
			}
		}
	}
	if v.Nodes != nil && podgroup.IsGang(pg) {
		out = append(out, v.capacityWarnings(what, pg)...)
	}
	if attr := podgroup.DeviceTopology(pg); attr != "" && v.Devices != nil {
		if has, known := v.Devices.hasAttribute(attr); known && !has {
			out = append(out, fmt.Sprintf("%s: no device in any ResourceSlice carries the attribute %q: the %s's devices cannot share a value of it, so it cannot be placed until a driver publishes it; write it as domain/name, e.g. gpu.example.com/clique", annotations.Key(lockv1.DeviceTopologyAnnotation), attr, what))
		}
	}
	return out
}

// specKeyAt is where a PodGroup's or CompositePodGroup's i-th required key
// is written.
func specKeyAt(i int) *field.Path {
	return field.NewPath("spec", "schedulingConstraints", "topology").Index(i).Child("key")
}

// capacityWarnings warns about a gang that can only land on Spot: its
// capacity types (its annotation's, else the default) allow only spot —
// each interruption restarts it whole — or nodes exist and none is of a
// type it allows, so it is never placed.
func (v topologyView) capacityWarnings(what string, pg *lockv1.PodGroup) admission.Warnings {
	policy := podgroup.GroupCapacityTypes(pg, podgroup.DefaultCapacityTypes)
	where := "the scheduler's default capacity types"
	if _, ok := pg.Annotations[lockv1.CapacityTypesAnnotation]; ok {
		where = field.NewPath("metadata", "annotations").Key(lockv1.CapacityTypesAnnotation).String()
	}
	nodes, allowed := 0, 0
	for _, t := range []podgroup.CapacityType{podgroup.OnDemand, podgroup.Reserved, podgroup.Spot} {
		n := v.Nodes.ofCapacity(t)
		nodes += n
		if policy.Allows(t) {
			allowed += n
		}
	}
	switch {
	case nodes > 0 && allowed == 0:
		return admission.Warnings{fmt.Sprintf("%s (%s): no node is of those capacity types (%d on-demand, %d reserved, %d spot), so the %s is never placed; add spot to %s if it may run on Spot (each interruption restarts it whole), or add capacity of the types it allows",
			where, policy, v.Nodes.ofCapacity(podgroup.OnDemand), v.Nodes.ofCapacity(podgroup.Reserved), v.Nodes.ofCapacity(podgroup.Spot), what, lockv1.CapacityTypesAnnotation)}
	case len(policy) == 1 && policy[0] == podgroup.Spot:
		return admission.Warnings{fmt.Sprintf("%s (spot): the %s runs on Spot capacity only, and each Spot interruption takes a node and restarts it whole, every rank losing its work since the last checkpoint; allow on-demand or reserved too if it may run there", where, what)}
	}
	return nil
}
