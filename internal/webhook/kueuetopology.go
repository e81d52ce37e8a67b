package webhook

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// kueueTopology are the pod template annotations of Kueue's
// topology-aware scheduling (TAS) that constrain placement, with the
// Lockstep annotation that says the same.
var kueueTopology = map[string]string{
	"kueue.x-k8s.io/podset-required-topology":       lockv1.RequiredTopologyAnnotation,
	"kueue.x-k8s.io/podset-preferred-topology":      lockv1.PreferredTopologyAnnotation,
	"kueue.x-k8s.io/podset-slice-required-topology": lockv1.RequiredTopologyAnnotation,
}

// kueueTopologyWarnings warns about a job whose templates ask Kueue's TAS
// for topology. Kueue's answer wins: when it admits the job it pins each
// pod to the node it chose (a node selector), and Lockstep can only place
// the pods there — so beside Lockstep's own topology (gang true, topo set)
// the two may disagree and the gang never starts; and Kueue chooses
// without seeing DRA devices (its capacity counts node resources only),
// so for pods that claim them it may pin to nodes whose devices are
// taken. Warned, not refused: a cluster whose Kueue topology levels nest
// inside Lockstep's, without DRA, works. Each warning names both and the
// way to keep one.
func kueueTopologyWarnings(j jobintegration.GenericJob, gang bool, topo jobintegration.Topology) admission.Warnings {
	var out admission.Warnings
	lockstep := lockstepTopology(topo)
	for _, r := range j.Roles() {
		keys := make([]string, 0, len(kueueTopology))
		for k := range r.Template.Annotations {
			if _, ok := kueueTopology[k]; ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := r.Template.Annotations[k]
			path := r.Path.Child("metadata", "annotations").Key(k)
			switch {
			case gang && lockstep != "":
				out = append(out, fmt.Sprintf("%s: Kueue's topology-aware scheduling (%s: %s) and Lockstep's topology (%s) both constrain this job, and Kueue's wins: "+
					"when it admits the job it pins each pod to a node it chose, and Lockstep only places the gang on those nodes — where they disagree (Kueue spreads the pods over two of Lockstep's domains, or picks nodes whose devices are taken) the gang is never placed; "+
					"keep one: remove %s to let Lockstep place the gang (it sees DRA devices), or remove Lockstep's annotations",
					path, k, v, lockstep, k))
			case len(r.Template.Spec.ResourceClaims) > 0:
				out = append(out, fmt.Sprintf("%s: Kueue's topology-aware scheduling (%s: %s) pins each pod to a node without seeing DRA devices (its capacity counts node resources only), so it may choose nodes whose devices are taken and the pods wait there; "+
					"let Lockstep choose instead: annotate the job %s: %s and remove %s",
					path, k, v, kueueTopology[k], v, k))
			}
		}
	}
	return out
}

// lockstepTopology names a job's Lockstep topology for a message ("" for
// none).
func lockstepTopology(t jobintegration.Topology) string {
	var parts []string
	if len(t.Required) > 0 {
		parts = append(parts, lockv1.RequiredTopologyAnnotation+": "+strings.Join(t.Required, ","))
	}
	if len(t.Preferred) > 0 {
		parts = append(parts, lockv1.PreferredTopologyAnnotation+": "+strings.Join(t.Preferred, ","))
	}
	if t.Device != "" {
		parts = append(parts, lockv1.DeviceTopologyAnnotation+": "+t.Device)
	}
	return strings.Join(parts, ", ")
}
