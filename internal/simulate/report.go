package simulate

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

// Report is what a simulation found, per scheduler. Its JSON field names
// are stable: scripts rely on them (docs/simulate.md).
type Report struct {
	Cluster  ClusterSummary  `json:"cluster"`
	Workload WorkloadSummary `json:"workload"`
	// HorizonSeconds is the window every scheduler is measured over: from
	// 0 to the last event of the longest run (or the --horizon).
	HorizonSeconds float64           `json:"horizonSeconds"`
	Schedulers     []SchedulerReport `json:"schedulers"`
}

// ClusterSummary describes the cluster.
type ClusterSummary struct {
	Name    string `json:"name,omitempty"`
	Nodes   int    `json:"nodes"`
	Devices int    `json:"devices"`
	// DomainLabel is the node label the fragmentation domains are the
	// values of.
	DomainLabel string   `json:"domainLabel"`
	Domains     []string `json:"domains"`
}

// WorkloadSummary describes the workload.
type WorkloadSummary struct {
	Jobs     int `json:"jobs"`
	GangJobs int `json:"gangJobs"`
	// TreeJobs are the gang jobs whose roles make a scheduling tree.
	TreeJobs           int     `json:"treeJobs,omitempty"`
	Pods               int     `json:"pods"`
	Failures           int     `json:"failures"`
	Priorities         []int32 `json:"priorities"`
	LastArrivalSeconds float64 `json:"lastArrivalSeconds"`
}

// SchedulerReport is one scheduler's run.
type SchedulerReport struct {
	Name         string `json:"name"`
	Approximates string `json:"approximates"`
	Jobs         int    `json:"jobs"`
	// JobsCompleted ran to the end; JobsNeverStarted never ran (all the
	// pods a gang needs never ran together), of which JobsDeadlocked
	// still held devices at the end and JobsNeverFit no longer fit the
	// cluster as failures left it.
	JobsCompleted    int `json:"jobsCompleted"`
	JobsNeverStarted int `json:"jobsNeverStarted"`
	JobsDeadlocked   int `json:"jobsDeadlocked"`
	JobsNeverFit     int `json:"jobsNeverFit"`
	// MakespanSeconds is from the first arrival to the last completion;
	// null when a job never completed.
	MakespanSeconds *float64 `json:"makespanSeconds"`
	// WaitSeconds: arrival to first run; CompletionSeconds: arrival to
	// completion (of the jobs that got there).
	WaitSeconds       Percentiles `json:"waitSeconds"`
	CompletionSeconds Percentiles `json:"completionSeconds"`
	// DeviceUtilization is the share of device-time used by running
	// jobs, DeviceHeldIdleFraction the share held by pods of jobs that
	// were not running whole.
	DeviceUtilization      float64 `json:"deviceUtilization"`
	DeviceHeldIdleFraction float64 `json:"deviceHeldIdleFraction"`
	DeviceHoursRunning     float64 `json:"deviceHoursRunning"`
	DeviceHoursHeldIdle    float64 `json:"deviceHoursHeldIdle"`
	// Preemptions are preemptions carried out; PreemptedPods their
	// victims; PreemptionDeviceHoursLost the device-hours of runs they cut
	// short.
	Preemptions               int     `json:"preemptions"`
	PreemptedPods             int     `json:"preemptedPods"`
	PreemptionDeviceHoursLost float64 `json:"preemptionDeviceHoursLost"`
	// GangRestarts: gangs restarted whole after losing a member;
	// FailureDeviceHoursLost: device-hours of runs failures cut short.
	GangRestarts           int                   `json:"gangRestarts"`
	FailureDeviceHoursLost float64               `json:"failureDeviceHoursLost"`
	Fragmentation          []DomainFragmentation `json:"fragmentation"`
	Seed002                Seed002               `json:"seed002"`
	ByPriority             []PriorityReport      `json:"byPriority"`
	// Decisions counts the decisions the core made, PreemptionSearches
	// those that searched for victims; CheapSkips the attempts the
	// capacity check spared the core.
	Decisions          int `json:"decisions"`
	PreemptionSearches int `json:"preemptionSearches"`
	CheapSkips         int `json:"cheapSkips"`
	// JobDetails are every job's fate (only with --job-details).
	JobDetails []JobReport `json:"jobDetails,omitempty"`

	samples []sample
	prios   []int32
	waits   []float64
}

// Percentiles of a set of durations, in seconds; null when the set is
// empty.
type Percentiles struct {
	Count int      `json:"count"`
	P50   *float64 `json:"p50"`
	P95   *float64 `json:"p95"`
	P99   *float64 `json:"p99"`
}

// DomainFragmentation is how free devices were spread in one domain over
// the horizon: the largest free block is the most devices free on one
// node (what the largest one-node pod could get).
type DomainFragmentation struct {
	Domain  string `json:"domain"`
	Devices int    `json:"devices"`
	// MeanFree and MeanLargestFreeBlock are time-weighted means;
	// MinLargestFreeBlock the least seen.
	MeanFree             float64 `json:"meanFree"`
	MeanLargestFreeBlock float64 `json:"meanLargestFreeBlock"`
	MinLargestFreeBlock  int     `json:"minLargestFreeBlock"`
}

// Seed002 are the four measurements seed 002 asks for.
type Seed002 struct {
	// TimeToInitiallyScheduledSeconds: from a job's creation to its group
	// being admitted whole (its first run).
	TimeToInitiallyScheduledSeconds Percentiles `json:"timeToInitiallyScheduledSeconds"`
	// PendingGroupsByPriority: jobs waiting, by priority, over time.
	PendingGroupsByPriority []PendingByPriority `json:"pendingGroupsByPriority"`
	// PreemptionsAttributed: preemptions by the job that made them.
	PreemptionsAttributed []Attribution `json:"preemptionsAttributed"`
	// DeviceAllocationFailures: decisions that failed for want of devices,
	// by requested DeviceClass.
	DeviceAllocationFailures []ClassFailures `json:"deviceAllocationFailures"`
}

// PendingByPriority is the time-weighted mean and the most jobs of one
// priority waiting at once.
type PendingByPriority struct {
	Priority int32   `json:"priority"`
	Mean     float64 `json:"mean"`
	Max      int     `json:"max"`
}

// Attribution is the preemptions one job made.
type Attribution struct {
	Job         string `json:"job"`
	Priority    int32  `json:"priority"`
	Preemptions int    `json:"preemptions"`
}

// ClassFailures counts failed decisions for one DeviceClass.
type ClassFailures struct {
	DeviceClass string `json:"deviceClass"`
	Decisions   int    `json:"decisions"`
}

// PriorityReport is a scheduler's run restricted to the jobs of one
// priority.
type PriorityReport struct {
	Priority         int32 `json:"priority"`
	Jobs             int   `json:"jobs"`
	JobsCompleted    int   `json:"jobsCompleted"`
	JobsNeverStarted int   `json:"jobsNeverStarted"`
	// MakespanSeconds is from the first arrival to the last completion of
	// this priority's jobs; null unless all of them completed.
	MakespanSeconds     *float64    `json:"makespanSeconds"`
	WaitSeconds         Percentiles `json:"waitSeconds"`
	CompletionSeconds   Percentiles `json:"completionSeconds"`
	DeviceHoursHeldIdle float64     `json:"deviceHoursHeldIdle"`
	// Preempted counts the times this priority's jobs were preempted;
	// PreemptionDeviceHoursLost the device-hours of their runs that
	// preemption cut short (gangs restart whole: the work is lost).
	Preempted                 int     `json:"preempted"`
	PreemptionDeviceHoursLost float64 `json:"preemptionDeviceHoursLost"`
}

// JobReport is one job's fate under one scheduler.
type JobReport struct {
	Job            string  `json:"job"`
	Priority       int32   `json:"priority"`
	ArrivalSeconds float64 `json:"arrivalSeconds"`
	// StartSeconds is its first run; StartOrder its rank among the jobs'
	// first runs; Nodes the nodes its pods ran on then.
	StartSeconds *float64 `json:"startSeconds"`
	StartOrder   int      `json:"startOrder,omitempty"`
	Nodes        []string `json:"nodes,omitempty"`
	EndSeconds   *float64 `json:"endSeconds"`
	// State at the end: Completed, Running, Waiting, Deadlocked (waiting
	// and holding devices), NeverFit.
	State string `json:"state"`
	// DevicesHeld are the devices its pods held at the end, HeldOn their
	// nodes.
	DevicesHeld int      `json:"devicesHeld,omitempty"`
	HeldOn      []string `json:"heldOn,omitempty"`
	Restarts    int      `json:"restarts,omitempty"`
	Preempted   int      `json:"preempted,omitempty"`
}

// Job states at the end.
const (
	JobCompleted  = "Completed"
	JobRunning    = "Running"
	JobWaiting    = "Waiting"
	JobDeadlocked = "Deadlocked"
	JobNeverFit   = "NeverFit"
)

func buildReport(cl *Cluster, wl *workload.Workload, worlds []*world, opts Options) *Report {
	r := &Report{Cluster: ClusterSummary{Name: cl.Name, Nodes: len(cl.Nodes), DomainLabel: opts.domainLabel()}}
	if len(worlds) > 0 {
		r.Cluster.Devices = worlds[0].rec.devices
		r.Cluster.Domains = worlds[0].rec.domains
		r.Workload.Priorities = worlds[0].rec.prios
	}
	r.Workload.Jobs, r.Workload.Failures = len(wl.Jobs), len(wl.Failures)
	for _, j := range wl.Jobs {
		r.Workload.Pods += len(j.Pods)
		if j.Gang() {
			r.Workload.GangJobs++
		}
		if j.Tree != nil {
			r.Workload.TreeJobs++
		}
		r.Workload.LastArrivalSeconds = max(r.Workload.LastArrivalSeconds, j.Arrival.Seconds())
	}
	horizon := opts.Horizon
	if horizon == 0 {
		for _, w := range worlds {
			horizon = max(horizon, w.now)
		}
	}
	r.HorizonSeconds = horizon.Seconds()
	for _, w := range worlds {
		r.Schedulers = append(r.Schedulers, schedulerReport(w, horizon))
	}
	return r
}

func schedulerReport(w *world, horizon time.Duration) SchedulerReport {
	rec := w.rec
	s := SchedulerReport{Name: w.m.Name, Approximates: w.m.Approximates, Decisions: rec.decisions, PreemptionSearches: rec.searches, CheapSkips: rec.skipped,
		Preemptions: rec.preemptions, PreemptedPods: rec.victims, PreemptionDeviceHoursLost: round(rec.preemptionLost / 3600),
		GangRestarts: rec.restarts, FailureDeviceHoursLost: round(rec.failureLost / 3600), samples: rec.samples, prios: rec.prios}
	s.Fragmentation, s.ByPriority = []DomainFragmentation{}, []PriorityReport{}
	s.Seed002.PreemptionsAttributed, s.Seed002.DeviceAllocationFailures = []Attribution{}, []ClassFailures{}
	s.Seed002.PendingGroupsByPriority = []PendingByPriority{}
	never := w.neverFit()
	var waits, completions []float64
	byPrio := map[int32]*PriorityReport{}
	prioWaits, prioCompletions := map[int32][]float64{}, map[int32][]float64{}
	// prioSpan is each priority's first arrival and last completion.
	prioSpan := map[int32]*[2]time.Duration{}
	first, last := time.Duration(-1), time.Duration(0)
	for _, j := range w.jobs {
		if j.state == stateNotArrived {
			continue
		}
		s.Jobs++
		pr := byPrio[j.spec.Priority]
		if pr == nil {
			pr = &PriorityReport{Priority: j.spec.Priority}
			byPrio[j.spec.Priority] = pr
			prioSpan[j.spec.Priority] = &[2]time.Duration{j.spec.Arrival, 0}
		}
		span := prioSpan[j.spec.Priority]
		pr.Jobs++
		pr.Preempted += j.preempted
		pr.PreemptionDeviceHoursLost += j.workLostSeconds
		span[0] = min(span[0], j.spec.Arrival)
		if first < 0 || j.spec.Arrival < first {
			first = j.spec.Arrival
		}
		jr := JobReport{Job: j.spec.Ref(), Priority: j.spec.Priority, ArrivalSeconds: j.spec.Arrival.Seconds(), Restarts: j.restarts, Preempted: j.preempted, DevicesHeld: j.devices}
		jr.HeldOn = nodesOf(j)
		if j.started {
			wt := (j.startAt - j.spec.Arrival).Seconds()
			waits = append(waits, wt)
			prioWaits[j.spec.Priority] = append(prioWaits[j.spec.Priority], wt)
			jr.StartSeconds, jr.StartOrder, jr.Nodes = ptrTo(j.startAt.Seconds()), j.startSeq, j.startNodes
		} else {
			s.JobsNeverStarted++
			pr.JobsNeverStarted++
		}
		switch {
		case j.done:
			s.JobsCompleted++
			pr.JobsCompleted++
			completions = append(completions, (j.doneAt - j.spec.Arrival).Seconds())
			prioCompletions[j.spec.Priority] = append(prioCompletions[j.spec.Priority], (j.doneAt - j.spec.Arrival).Seconds())
			span[1] = max(span[1], j.doneAt)
			jr.EndSeconds, jr.State = ptrTo(j.doneAt.Seconds()), JobCompleted
			last = max(last, j.doneAt)
		case j.state == stateRunning:
			jr.State = JobRunning
		case !j.started && never[j]:
			s.JobsNeverFit++
			jr.State = JobNeverFit
		case !j.started && j.devices > 0:
			s.JobsDeadlocked++
			jr.State = JobDeadlocked
		default:
			jr.State = JobWaiting
		}
		s.JobDetails = append(s.JobDetails, jr)
	}
	if s.Jobs > 0 && s.JobsCompleted == s.Jobs {
		s.MakespanSeconds = ptrTo((last - first).Seconds())
	}
	s.waits = waits
	s.WaitSeconds, s.CompletionSeconds = percentiles(waits), percentiles(completions)
	s.Seed002.TimeToInitiallyScheduledSeconds = s.WaitSeconds
	integrate(&s, rec, horizon)
	for _, p := range rec.prios {
		if pr := byPrio[p]; pr != nil {
			pr.WaitSeconds, pr.CompletionSeconds = percentiles(prioWaits[p]), percentiles(prioCompletions[p])
			pr.PreemptionDeviceHoursLost = round(pr.PreemptionDeviceHoursLost / 3600)
			if pr.JobsCompleted == pr.Jobs {
				pr.MakespanSeconds = ptrTo((prioSpan[p][1] - prioSpan[p][0]).Seconds())
			}
			s.ByPriority = append(s.ByPriority, *pr)
		}
	}
	heldByPrio := integrateHeld(rec, horizon)
	for i := range s.ByPriority {
		s.ByPriority[i].DeviceHoursHeldIdle = round(heldByPrio[rec.prioIndex[s.ByPriority[i].Priority]] / 3600)
	}
	s.Seed002.PreemptionsAttributed = attributions(w)
	for c, n := range rec.classFailures {
		s.Seed002.DeviceAllocationFailures = append(s.Seed002.DeviceAllocationFailures, ClassFailures{DeviceClass: c, Decisions: n})
	}
	sort.Slice(s.Seed002.DeviceAllocationFailures, func(i, j int) bool {
		return s.Seed002.DeviceAllocationFailures[i].DeviceClass < s.Seed002.DeviceAllocationFailures[j].DeviceClass
	})
	return s
}

// integrate turns the samples (a step function) into the time-weighted
// figures over [0, horizon].
func integrate(s *SchedulerReport, rec *recorder, horizon time.Duration) {
	nd := len(rec.domains)
	var running, held float64
	free, largest := make([]float64, nd), make([]float64, nd)
	minLargest := make([]int, nd)
	for i := range minLargest {
		minLargest[i] = -1
	}
	waiting := make([]float64, len(rec.prios))
	maxWaiting := make([]int, len(rec.prios))
	forSteps(rec.samples, horizon, func(sm sample, dt float64) {
		running += float64(sm.running) * dt
		held += float64(sm.held) * dt
		for d := 0; d < nd; d++ {
			free[d] += float64(sm.free[d]) * dt
			largest[d] += float64(sm.largest[d]) * dt
			if minLargest[d] < 0 || sm.largest[d] < minLargest[d] {
				minLargest[d] = sm.largest[d]
			}
		}
		for i, n := range sm.waiting {
			waiting[i] += float64(n) * dt
			maxWaiting[i] = max(maxWaiting[i], n)
		}
	})
	h := horizon.Seconds()
	s.DeviceHoursRunning, s.DeviceHoursHeldIdle = round(running/3600), round(held/3600)
	if h > 0 && rec.devices > 0 {
		s.DeviceUtilization = round(running / (h * float64(rec.devices)))
		s.DeviceHeldIdleFraction = round(held / (h * float64(rec.devices)))
	}
	perDomain := make([]int, nd)
	for node, d := range rec.domainOf {
		perDomain[d] += rec.nodeDevices[node]
	}
	for d, name := range rec.domains {
		f := DomainFragmentation{Domain: name, Devices: perDomain[d], MinLargestFreeBlock: max(minLargest[d], 0)}
		if h > 0 {
			f.MeanFree, f.MeanLargestFreeBlock = round(free[d]/h), round(largest[d]/h)
		}
		s.Fragmentation = append(s.Fragmentation, f)
	}
	for i, p := range rec.prios {
		pb := PendingByPriority{Priority: p, Max: maxWaiting[i]}
		if h > 0 {
			pb.Mean = round(waiting[i] / h)
		}
		s.Seed002.PendingGroupsByPriority = append(s.Seed002.PendingGroupsByPriority, pb)
	}
}

func integrateHeld(rec *recorder, horizon time.Duration) []float64 {
	out := make([]float64, len(rec.prios))
	forSteps(rec.samples, horizon, func(sm sample, dt float64) {
		for i, n := range sm.heldByPrio {
			out[i] += float64(n) * dt
		}
	})
	return out
}

// forSteps calls f with each sample and how long (seconds) it held
// within [0, horizon]: until the next sample, the last until the horizon.
func forSteps(samples []sample, horizon time.Duration, f func(sample, float64)) {
	for i, sm := range samples {
		if sm.at >= horizon {
			if sm.at == horizon && i == len(samples)-1 {
				f(sm, 0)
			}
			break
		}
		end := horizon
		if i+1 < len(samples) && samples[i+1].at < horizon {
			end = samples[i+1].at
		}
		f(sm, (end - sm.at).Seconds())
	}
}

func attributions(w *world) []Attribution {
	out := []Attribution{}
	for _, j := range w.jobs {
		if j.preemptions > 0 {
			out = append(out, Attribution{Job: j.spec.Ref(), Priority: j.spec.Priority, Preemptions: j.preemptions})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Preemptions > out[j].Preemptions })
	return out
}

// neverFit are the jobs that never started and do not fit the cluster as
// the run left it (failed nodes and devices out), with nothing running.
func (w *world) neverFit() map[*jobRun]bool {
	var waiting []*jobRun
	for _, j := range w.jobs {
		if j.state == stateWaiting && !j.started {
			waiting = append(waiting, j)
		}
	}
	out := map[*jobRun]bool{}
	if len(waiting) == 0 {
		return out
	}
	cl := &Cluster{Name: w.cl.Name, Classes: w.cl.Classes}
	for _, n := range sortedKeys(w.nodes) {
		cl.Nodes = append(cl.Nodes, w.nodes[n])
	}
	for _, n := range sortedKeys(w.slices) {
		cl.Slices = append(cl.Slices, w.slices[n])
	}
	f := newFitter(context.Background(), cl, w.wl)
	for _, j := range waiting {
		if ok, _ := f.fits(j.spec); !ok {
			out[j] = true
		}
	}
	return out
}

// percentiles by nearest rank.
func percentiles(v []float64) Percentiles {
	p := Percentiles{Count: len(v)}
	if len(v) == 0 {
		return p
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	at := func(q float64) *float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return ptrTo(s[max(i, 0)])
	}
	p.P50, p.P95, p.P99 = at(0.50), at(0.95), at(0.99)
	return p
}

func ptrTo(v float64) *float64 { return &v }

// round keeps 4 decimals (figures, not noise).
func round(v float64) float64 { return math.Round(v*1e4) / 1e4 }
