package simulate

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/simulate/report"
)

// DefaultDomainLabel groups nodes into the domains fragmentation is
// reported for.
const DefaultDomainLabel = corev1.LabelTopologyZone

// recorder keeps what the report needs as the simulation goes: counters
// kept current by every change, and a sample of the state after each
// instant (a step function of virtual time).
type recorder struct {
	w         *world
	prios     []int32 // the jobs' priorities, highest first
	prioIndex map[int32]int
	domains   []string
	domainOf  map[string]int
	// sampled and sampledDomain are the nodes of the last sample's
	// snapshot and their domains, by position: the node set rarely
	// changes between instants, and a sample reads every node.
	sampled       []*corev1.Node
	sampledDomain []int
	// devices are the cluster's devices (DRA devices and node-local
	// extended resources); nodeDevices by node.
	devices     int
	nodeDevices map[string]int
	down        map[string]bool
	failedDev   map[string]int
	// unusable counts the devices of failed nodes and failed devices.
	unusable int

	// devices held by the pods of running jobs, and of jobs not running;
	// the same by priority index.
	running, held        int
	heldByPrio, waiting  []int
	boundByPrio          map[int32]int
	samples              []report.Sample
	starts               int
	preemptions, victims int
	preemptionLost       float64
	failureLost          float64
	restarts             int
	classFailures        map[string]int
	decisions, skipped   int
	searches             int
	shortWaits           int
}

func newRecorder(w *world, opts Options) *recorder {
	r := &recorder{w: w, prioIndex: map[int32]int{}, domainOf: map[string]int{}, nodeDevices: map[string]int{},
		down: map[string]bool{}, failedDev: map[string]int{}, boundByPrio: map[int32]int{}, classFailures: map[string]int{}}
	for _, j := range w.wl.Jobs {
		if _, ok := r.prioIndex[j.Priority]; !ok {
			r.prioIndex[j.Priority] = 0
			r.prios = append(r.prios, j.Priority)
		}
	}
	sort.Slice(r.prios, func(i, j int) bool { return r.prios[i] > r.prios[j] })
	for i, p := range r.prios {
		r.prioIndex[p] = i
	}
	r.waiting, r.heldByPrio = make([]int, len(r.prios)), make([]int, len(r.prios))
	r.domains, r.domainOf = domains(w.cl.Nodes, opts.domainLabel())
	for _, sl := range w.cl.Slices {
		r.devices += len(sl.Spec.Devices)
		if sl.Spec.NodeName != nil {
			r.nodeDevices[*sl.Spec.NodeName] += len(sl.Spec.Devices)
		}
	}
	for _, n := range w.cl.Nodes {
		for name, q := range n.Status.Allocatable {
			if isDeviceResource(name) && !w.draResource(name) {
				r.devices += int(q.Value())
				r.nodeDevices[n.Name] += int(q.Value())
			}
		}
	}
	return r
}

// domains groups nodes by the value of label ("cluster" for all when no
// node has it; "(no <label>)" for the nodes without it).
func domains(nodes []*corev1.Node, label string) ([]string, map[string]int) {
	values := map[string]bool{}
	for _, n := range nodes {
		if v, ok := n.Labels[label]; ok {
			values[v] = true
		}
	}
	of := map[string]int{}
	if len(values) == 0 {
		for _, n := range nodes {
			of[n.Name] = 0
		}
		return []string{"cluster"}, of
	}
	var names []string
	for v := range values {
		names = append(names, v)
	}
	sort.Strings(names)
	none := "(no " + label + ")"
	for _, n := range nodes {
		v, ok := n.Labels[label]
		if !ok {
			v = none
			if !slices.Contains(names, none) {
				names = append(names, none)
			}
		}
		of[n.Name] = slices.Index(names, v)
	}
	return names, of
}

// setState moves a job to state s, keeping the counts of devices held by
// running and waiting jobs and of waiting jobs by priority.
func (r *recorder) setState(j *jobRun, s int) {
	if j.state == s {
		return
	}
	r.account(j, j.state, -1)
	j.state = s
	r.account(j, s, +1)
}

func (r *recorder) account(j *jobRun, s, sign int) {
	pi := r.prioIndex[j.spec.Priority]
	switch s {
	case stateRunning:
		r.running += sign * j.devices
	case stateWaiting:
		r.held += sign * j.devices
		r.heldByPrio[pi] += sign * j.devices
		r.waiting[pi] += sign
	}
}

// bound counts a pod bound (+1) or no longer bound (-1).
func (r *recorder) bound(pr *podRun, sign int) {
	j := pr.job
	r.account(j, j.state, -1)
	j.bound += sign
	j.devices += sign * pr.devices
	r.account(j, j.state, +1)
	r.boundByPrio[*pr.pod.Spec.Priority] += sign
	if sign > 0 && !j.everBound {
		j.everBound, j.firstBindAt = true, r.w.now
	}
}

// start records a job's first run: when, in which order, on which nodes.
func (r *recorder) start(j *jobRun) {
	r.starts++
	j.started, j.startAt, j.startSeq = true, r.w.now, r.starts
	j.startNodes = nodesOf(j)
}

// nodesOf are the nodes of a job's bound pods, sorted.
func nodesOf(j *jobRun) []string {
	var out []string
	for _, pr := range j.pods {
		if pr.node != "" {
			out = append(out, pr.node)
		}
	}
	sort.Strings(out)
	return out
}

func (r *recorder) preemption(j *jobRun, pods int) {
	r.preemptions++
	r.victims += pods
}

// failed counts, once per class, a decision that failed for devices (seed
// 002's "GPU allocation failures by requested capability").
func (r *recorder) failed(d decide.Decision) {
	if d.Kind != decide.Unschedulable {
		return
	}
	classes := map[string]bool{}
	for _, n := range d.Leaves() {
		for _, f := range d.Leaf(n).Outcome.Waiting {
			if f.Diagnosis.Reasons[placement.ReasonDevices] > 0 {
				for _, c := range f.Diagnosis.DeviceClasses {
					classes[c] = true
				}
			}
		}
	}
	for c := range classes {
		r.classFailures[c]++
	}
}

// deviceShort counts an attempt the capacity check refused for want of
// devices (as failed, without a decision).
func (r *recorder) deviceShort(classes []string) {
	for _, c := range classes {
		r.classFailures[c]++
	}
}

func (r *recorder) nodeDown(node string, down bool) {
	if r.down[node] != down {
		// A down node's devices are unusable, its failed devices among them.
		d := r.nodeDevices[node] - r.failedDev[node]
		if !down {
			d = -d
		}
		r.unusable += d
	}
	r.down[node] = down
}

func (r *recorder) deviceDown(node string, delta int) {
	r.failedDev[node] += delta
	if !r.down[node] {
		r.unusable += delta
	}
}

// freeDevices is an upper bound of the devices free now, of every class:
// the cluster's, less those pods hold and those of failed nodes and
// devices (a failure evicts the pods on what failed at the same instant,
// so no device is subtracted twice).
func (r *recorder) freeDevices() int {
	return r.devices - r.running - r.held - r.unusable
}

// domainAt is the domain of node n, at position i of the snapshot's nodes.
func (r *recorder) domainAt(i int, n *corev1.Node) int {
	if r.sampled[i] != n {
		r.sampled[i], r.sampledDomain[i] = n, r.domainOf[n.Name]
	}
	return r.sampledDomain[i]
}

// sample records the state after an instant (one sample per instant).
func (r *recorder) sample() {
	snap := r.w.st.Cache.Update()
	s := report.Sample{At: r.w.now, Running: r.running, Held: r.held,
		Waiting: slices.Clone(r.waiting), HeldByPrio: slices.Clone(r.heldByPrio),
		Free: make([]int, len(r.domains)), Largest: make([]int, len(r.domains))}
	if len(r.sampled) != len(snap.Nodes) {
		r.sampled, r.sampledDomain = make([]*corev1.Node, len(snap.Nodes)), make([]int, len(snap.Nodes))
	}
	for i, ni := range snap.Nodes {
		name := ni.Node.Name
		if r.down[name] {
			continue
		}
		f := ni.FreeDevices() - r.failedDev[name]
		for res, v := range ni.Allocatable.Scalar {
			if isDeviceResource(res) && !r.w.draResource(res) {
				f += int(v - ni.Requested.Scalar[res])
			}
		}
		d := r.domainAt(i, ni.Node)
		s.Free[d] += f
		s.Largest[d] = max(s.Largest[d], f)
	}
	if n := len(r.samples); n > 0 && r.samples[n-1].At == s.At {
		r.samples[n-1] = s
		return
	}
	r.samples = append(r.samples, s)
}
