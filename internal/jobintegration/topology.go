package jobintegration

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Topology is where a job's groups must, and would rather, run: what the
// PodGroups made for it get as spec.schedulingConstraints.topology
// (Required) and as Lockstep's annotations (Preferred, Device).
type Topology struct {
	Required, Preferred []string
	Device              string
}

// IsZero reports whether the groups may go anywhere.
func (t Topology) IsZero() bool {
	return len(t.Required) == 0 && len(t.Preferred) == 0 && t.Device == ""
}

// GroupTopologist is a kind whose groups have topology of their own beside
// the annotations' (a JobSet's exclusive-topology): t is the job's.
type GroupTopologist interface {
	GroupTopology(g Group, t Topology) Topology
}

// TopologyOf reads a job's topology annotations: the node label keys of
// lockv1.RequiredTopologyAnnotation and lockv1.PreferredTopologyAnnotation
// (comma-separated, the preferred narrowest first), and the device
// attribute of lockv1.DeviceTopologyAnnotation. A key that is not a valid
// label key (or attribute name) is refused, naming the annotation.
func TopologyOf(j GenericJob) (Topology, *NotQualified) {
	ann := j.Object().GetAnnotations()
	var t Topology
	for _, a := range []struct {
		key  string
		into *[]string
	}{{lockv1.RequiredTopologyAnnotation, &t.Required}, {lockv1.PreferredTopologyAnnotation, &t.Preferred}} {
		for _, k := range splitKeys(ann[a.key]) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return Topology{}, &NotQualified{Condition: fmt.Sprintf("%s names %q, not a node label key (%s)", a.key, k, errs[0]), Fix: "name node label keys, e.g. topology.kubernetes.io/zone"}
			}
			*a.into = append(*a.into, k)
		}
	}
	if d := strings.TrimSpace(ann[lockv1.DeviceTopologyAnnotation]); d != "" {
		if errs := validation.IsQualifiedName(d); len(errs) > 0 || !strings.Contains(d, "/") {
			return Topology{}, &NotQualified{Condition: fmt.Sprintf("%s names %q, not a qualified device attribute", lockv1.DeviceTopologyAnnotation, d), Fix: "name a device attribute with its domain, e.g. gpu.example.com/clique"}
		}
		t.Device = d
	}
	return t, nil
}

// groupTopology is the topology of one of j's groups.
func groupTopology(j GenericJob, g Group, t Topology) Topology {
	if gt, ok := j.(GroupTopologist); ok {
		return gt.GroupTopology(g, t)
	}
	return t
}

func splitKeys(s string) []string {
	var out []string
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// apply sets the topology on a PodGroup (or template) spec and its
// annotations.
func (t Topology) apply(c **lockv1.PodGroupSchedulingConstraints, annotations *map[string]string) {
	if len(t.Required) > 0 {
		*c = &lockv1.PodGroupSchedulingConstraints{}
		for _, k := range t.Required {
			(*c).Topology = append((*c).Topology, lockv1.TopologyConstraint{Key: k})
		}
	}
	if annotations == nil {
		return
	}
	if len(t.Preferred) > 0 || t.Device != "" {
		if *annotations == nil {
			*annotations = map[string]string{}
		}
	}
	if len(t.Preferred) > 0 {
		(*annotations)[lockv1.PreferredTopologyAnnotation] = strings.Join(t.Preferred, ",")
	}
	if t.Device != "" {
		(*annotations)[lockv1.DeviceTopologyAnnotation] = t.Device
	}
}
