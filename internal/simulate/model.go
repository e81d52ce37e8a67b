package simulate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

// Model names, as -o json reports them (schedulers[].name).
const (
	Lockstep   = "lockstep"
	PodByPod   = "pod-by-pod"
	InTreeGang = "in-tree-gang"
)

// Model is a scheduler the workload is simulated under. Every model
// places with Lockstep's decision core (internal/decide on the cycle
// state of internal/cycle); they differ in what they make a unit, what
// they may preempt and whether a gang that loses a member restarts.
type Model struct {
	Name string
	// Approximates says what the model stands for and how it differs
	// from the real scheduler it names.
	Approximates string
	// gangs: a job with a gang shape is one unit, placed all or nothing;
	// else every pod is a unit of its own.
	gangs bool
	// inTree: jobs' groups are the in-tree 1.37 ones (Job.InTree:
	// disruptionMode single unless the job says all).
	inTree bool
	// preemptDRA: preemption may evict pods to free DRA devices (else a
	// unit that needs a DRA device does not preempt).
	preemptDRA bool
	// restarts: a gang that loses a member is restarted whole
	// (internal/integrity).
	restarts bool
	// waits: a preemptor waits first as Lockstep's scheduler makes it
	// (Options.PreemptionShortWait, PreemptionDelay).
	waits bool
}

var models = []Model{
	{
		Name: Lockstep, gangs: true, preemptDRA: true, restarts: true, waits: true,
		Approximates: "Lockstep: its own decision core (internal/decide: placement, DRA allocation, cluster-wide gang preemption that frees DRA devices) " +
			"on the scheduler's cycle state, jobs made gangs by its Job and JobSet integrations (disruptionMode all by default), " +
			"and its integrity controller's verdict (internal/integrity) restarting a gang whole when it loses a member. " +
			"Not modelled: API latency, the binding cycle running beside the next decisions, back-off between attempts.",
	},
	{
		Name: PodByPod,
		Approximates: "kube-scheduler 1.37's default: one pod at a time in queue order (priority, then creation), no gang, " +
			"pod preemption only for pods that need no DRA device. Each pod is placed as a lone unit with Lockstep's filters " +
			"(differential-tested against kube-scheduler's) and Lockstep's node order — tightest node first — where kube-scheduler " +
			"scores with LeastAllocated (spreading) and breaks ties at random; packing fragments less, so the partial starts and " +
			"held devices reported for this model are, if anything, fewer than kube-scheduler's.",
	},
	{
		Name: InTreeGang, gangs: true, inTree: true,
		Approximates: "kube-scheduler 1.37 with the in-tree gang (GenericWorkload, WorkloadWithJob): every job with a gang shape " +
			"(Indexed Job or JobSet, completions = parallelism > 1) admitted all or nothing, disruptionMode single by default " +
			"(a preempted or failed member leaves the others running), workload-aware preemption only for gangs that need no DRA " +
			"device, no restart of a gang that lost a member. Placement is Lockstep's (as for pod-by-pod).",
	},
}

// Models are the schedulers the simulator knows, in report order.
func Models() []Model { return append([]Model(nil), models...) }

// ModelNames are the models' names.
func ModelNames() []string {
	out := make([]string, len(models))
	for i, m := range models {
		out[i] = m.Name
	}
	return out
}

// ParseModels resolves model names, in the order given; an unknown or
// repeated name is refused.
func ParseModels(names []string) ([]Model, error) {
	seen := map[string]bool{}
	var out []Model
	for _, n := range names {
		n = strings.TrimSpace(n)
		var found *Model
		for i := range models {
			if models[i].Name == n {
				found = &models[i]
			}
		}
		switch {
		case found == nil:
			return nil, fmt.Errorf("scheduler %q: not a simulated scheduler; use %s", n, strings.Join(ModelNames(), ", "))
		case seen[n]:
			return nil, fmt.Errorf("scheduler %q given twice", n)
		}
		seen[n] = true
		out = append(out, *found)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scheduler to simulate; use %s", strings.Join(ModelNames(), ", "))
	}
	return out, nil
}

// groups are the PodGroups the model schedules a job as (nil: its pods
// one by one).
func (m Model) groups(j *workload.Job) []*lockv1.PodGroup {
	switch {
	case !m.gangs:
		return nil
	case m.inTree:
		return j.InTree
	}
	return j.Gangs
}

// tree is the root CompositePodGroup the model hangs a job's groups
// under (nil: each group is a unit of its own). Only Lockstep places
// trees; the in-tree 1.37 model places a tree job's groups one by one.
func (m Model) tree(j *workload.Job) *lockv1.CompositePodGroup {
	if !m.gangs || m.inTree {
		return nil
	}
	return j.Tree
}

// Cluster is what a workload runs on: nodes, their ResourceSlices and the
// DeviceClasses. The simulation starts it empty (nothing running).
type Cluster struct {
	Name    string
	Nodes   []*corev1.Node
	Slices  []*resourcev1.ResourceSlice
	Classes []*resourcev1.DeviceClass
}

// ClusterFromSpec renders a cluster spec (the `dev up --cluster` format).
func ClusterFromSpec(spec *clusterspec.Cluster) (*Cluster, error) {
	objs, err := clusterspec.Render(spec)
	if err != nil {
		return nil, err
	}
	return &Cluster{Name: spec.Name, Nodes: objs.Nodes, Slices: objs.ResourceSlices, Classes: objs.DeviceClasses}, nil
}
