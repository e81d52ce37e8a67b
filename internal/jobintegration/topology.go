package jobintegration

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Topology is where a job's groups must, and would rather, run: what the
// PodGroups made for it get as spec.schedulingConstraints.topology
// (Required) and as Lockstep's annotations (Preferred, Device).
type Topology struct {
	Required, Preferred []string
	Device              string
	// Capacity is the capacity types its groups may use, as
	// lockv1.CapacityTypesAnnotation writes them ("" for the scheduler's
	// default).
	Capacity string
	// Terms are the job's preemption terms its groups (and its tree's
	// root) get as annotations: lockv1.MinRuntimeAnnotation and
	// lockv1.PreemptionNoticeAnnotation, each a positive duration.
	Terms map[string]string
}

// termAnnotations are the preemption terms a job passes to its groups.
var termAnnotations = []string{lockv1.MinRuntimeAnnotation, lockv1.PreemptionNoticeAnnotation, lockv1.PreemptionDelayAnnotation, lockv1.MaxRuntimeAnnotation}

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
		v, set := ann[a.key]
		if !set {
			continue
		}
		if err := podgroup.CheckKeys(v); err != nil {
			return Topology{}, &NotQualified{Condition: fmt.Sprintf("%s: %s", a.key, err.Problem), Fix: err.Fix}
		}
		*a.into = splitKeys(v)
	}
	if d, set := ann[lockv1.DeviceTopologyAnnotation]; set {
		if err := podgroup.CheckDeviceAttribute(d); err != nil {
			return Topology{}, &NotQualified{Condition: fmt.Sprintf("%s: %s", lockv1.DeviceTopologyAnnotation, err.Problem), Fix: err.Fix}
		}
		t.Device = strings.TrimSpace(d) // "" names none
	}
	if v, set := ann[lockv1.CapacityTypesAnnotation]; set {
		c, err := podgroup.ParseCapacityTypes(v)
		if err != nil {
			return Topology{}, &NotQualified{Condition: fmt.Sprintf("%s: %s", lockv1.CapacityTypesAnnotation, err.Problem), Fix: err.Fix}
		}
		t.Capacity = c.String()
	}
	for _, key := range termAnnotations {
		v, set := ann[key]
		if !set {
			continue
		}
		if _, err := podgroup.ParseMinRuntime(v); err != nil {
			return Topology{}, &NotQualified{Condition: fmt.Sprintf("%s: %q is not a positive duration", key, v), Fix: "write a Go duration such as 30m or 2h"}
		}
		if t.Terms == nil {
			t.Terms = map[string]string{}
		}
		t.Terms[key] = strings.TrimSpace(v)
	}
	if job, ok := j.Object().(*batchv1.Job); ok && job.Spec.ActiveDeadlineSeconds != nil && t.Terms[lockv1.MaxRuntimeAnnotation] == "" {
		// The Job ends by its deadline, counted from its start — before
		// its gang's: a declared end for preemptors to wait for.
		if t.Terms == nil {
			t.Terms = map[string]string{}
		}
		t.Terms[lockv1.MaxRuntimeAnnotation] = (time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second).String()
	}
	return t, nil
}

// AsPodGroup is a gang PodGroup with the topology t gives the groups made
// for its job (what admission reads to warn about it).
func (t Topology) AsPodGroup() *lockv1.PodGroup {
	pg := &lockv1.PodGroup{}
	pg.Spec.SchedulingPolicy.Gang = &lockv1.GangSchedulingPolicy{MinCount: 1}
	t.apply(&pg.Spec.SchedulingConstraints, &pg.Annotations)
	return pg
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
	if len(t.Preferred) > 0 || t.Device != "" || t.Capacity != "" || len(t.Terms) > 0 {
		if *annotations == nil {
			*annotations = map[string]string{}
		}
	}
	for k, v := range t.Terms {
		(*annotations)[k] = v
	}
	if t.Capacity != "" {
		(*annotations)[lockv1.CapacityTypesAnnotation] = t.Capacity
	}
	if len(t.Preferred) > 0 {
		(*annotations)[lockv1.PreferredTopologyAnnotation] = strings.Join(t.Preferred, ",")
	}
	if t.Device != "" {
		(*annotations)[lockv1.DeviceTopologyAnnotation] = t.Device
	}
}
