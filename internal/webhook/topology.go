package webhook

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// topologyWarnings warns about topology a group names that nothing in the
// cluster carries: a required or preferred key no node has (a group
// requiring it waits until nodes are labelled; one preferring it falls
// back to its next level), and a device attribute no device publishes.
// It reads the cached node labels and device inventory only; a view that
// is not there (nil) warns of nothing.
func (v *PodGroupValidator) topologyWarnings(pg *lockv1.PodGroup) admission.Warnings {
	var out admission.Warnings
	if v.Nodes != nil {
		for i, key := range podgroup.TopologyKeys(pg) {
			if v.Nodes.carried(key) == 0 {
				path := field.NewPath("spec", "schedulingConstraints", "topology").Index(i).Child("key")
				out = append(out, fmt.Sprintf("%s: no node carries the label %q: the group cannot be placed until nodes are labelled %s=<domain>; check the key's spelling (`lockstep preflight` lists the topology keys nodes carry)", path, key, key))
			}
		}
		annotation := field.NewPath("metadata", "annotations").Key(lockv1.PreferredTopologyAnnotation)
		for _, key := range podgroup.PreferredTopology(pg) {
			if v.Nodes.carried(key) == 0 {
				out = append(out, fmt.Sprintf("%s: no node carries the label %q: this preferred level is never met, the group is placed at its next level; check the key's spelling (`lockstep preflight` lists the topology keys nodes carry)", annotation, key))
			}
		}
	}
	if attr := podgroup.DeviceTopology(pg); attr != "" && v.Devices != nil {
		if has, known := v.Devices.hasAttribute(attr); known && !has {
			out = append(out, fmt.Sprintf("%s: no device in any ResourceSlice carries the attribute %q: the group's devices cannot share a value of it, so it cannot be placed until a driver publishes it; write it as domain/name, e.g. gpu.example.com/clique", field.NewPath("metadata", "annotations").Key(lockv1.DeviceTopologyAnnotation), attr))
		}
	}
	return out
}
