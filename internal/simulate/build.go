package simulate

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/lockstep-dev/lockstep/internal/simulate/report"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

func buildReport(cl *Cluster, wl *workload.Workload, worlds []*world, opts Options) *report.Report {
	r := &report.Report{Cluster: report.ClusterSummary{Name: cl.Name, Nodes: len(cl.Nodes), DomainLabel: opts.domainLabel()}}
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

func schedulerReport(w *world, horizon time.Duration) report.SchedulerReport {
	rec := w.rec
	s := report.SchedulerReport{Name: w.m.Name, Approximates: w.m.Approximates, Decisions: rec.decisions, PreemptionSearches: rec.searches, ShortWaits: rec.shortWaits, CheapSkips: rec.skipped,
		Preemptions: rec.preemptions, PreemptedPods: rec.victims, PreemptionDeviceHoursLost: round(rec.preemptionLost / 3600),
		GangRestarts: rec.restarts, FailureDeviceHoursLost: round(rec.failureLost / 3600), Samples: rec.samples}
	s.Fragmentation, s.ByPriority = []report.DomainFragmentation{}, []report.PriorityReport{}
	s.Seed002.PreemptionsAttributed, s.Seed002.DeviceAllocationFailures = []report.Attribution{}, []report.ClassFailures{}
	s.Seed002.PendingGroupsByPriority = []report.PendingByPriority{}
	never := w.neverFit()
	var waits, completions []float64
	byPrio := map[int32]*report.PriorityReport{}
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
			pr = &report.PriorityReport{Priority: j.spec.Priority}
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
		jr := report.JobReport{Job: j.spec.Ref(), Priority: j.spec.Priority, ArrivalSeconds: j.spec.Arrival.Seconds(), Restarts: j.restarts, Preempted: j.preempted, DevicesHeld: j.devices}
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
			jr.EndSeconds, jr.State = ptrTo(j.doneAt.Seconds()), report.JobCompleted
			last = max(last, j.doneAt)
		case j.state == stateRunning:
			jr.State = report.JobRunning
		case !j.started && never[j]:
			s.JobsNeverFit++
			jr.State = report.JobNeverFit
		case !j.started && j.devices > 0:
			s.JobsDeadlocked++
			jr.State = report.JobDeadlocked
		default:
			jr.State = report.JobWaiting
		}
		s.JobDetails = append(s.JobDetails, jr)
	}
	if s.Jobs > 0 && s.JobsCompleted == s.Jobs {
		s.MakespanSeconds = ptrTo((last - first).Seconds())
	}
	s.Waits = waits
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
		s.Seed002.DeviceAllocationFailures = append(s.Seed002.DeviceAllocationFailures, report.ClassFailures{DeviceClass: c, Decisions: n})
	}
	sort.Slice(s.Seed002.DeviceAllocationFailures, func(i, j int) bool {
		return s.Seed002.DeviceAllocationFailures[i].DeviceClass < s.Seed002.DeviceAllocationFailures[j].DeviceClass
	})
	return s
}

// integrate turns the samples (a step function) into the time-weighted
// figures over [0, horizon].
func integrate(s *report.SchedulerReport, rec *recorder, horizon time.Duration) {
	nd := len(rec.domains)
	var running, held float64
	free, largest := make([]float64, nd), make([]float64, nd)
	minLargest := make([]int, nd)
	for i := range minLargest {
		minLargest[i] = -1
	}
	waiting := make([]float64, len(rec.prios))
	maxWaiting := make([]int, len(rec.prios))
	report.ForSteps(rec.samples, horizon, func(sm report.Sample, dt float64) {
		running += float64(sm.Running) * dt
		held += float64(sm.Held) * dt
		for d := 0; d < nd; d++ {
			free[d] += float64(sm.Free[d]) * dt
			largest[d] += float64(sm.Largest[d]) * dt
			if minLargest[d] < 0 || sm.Largest[d] < minLargest[d] {
				minLargest[d] = sm.Largest[d]
			}
		}
		for i, n := range sm.Waiting {
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
		f := report.DomainFragmentation{Domain: name, Devices: perDomain[d], MinLargestFreeBlock: max(minLargest[d], 0)}
		if h > 0 {
			f.MeanFree, f.MeanLargestFreeBlock = round(free[d]/h), round(largest[d]/h)
		}
		s.Fragmentation = append(s.Fragmentation, f)
	}
	for i, p := range rec.prios {
		pb := report.PendingByPriority{Priority: p, Max: maxWaiting[i]}
		if h > 0 {
			pb.Mean = round(waiting[i] / h)
		}
		s.Seed002.PendingGroupsByPriority = append(s.Seed002.PendingGroupsByPriority, pb)
	}
}

func integrateHeld(rec *recorder, horizon time.Duration) []float64 {
	out := make([]float64, len(rec.prios))
	report.ForSteps(rec.samples, horizon, func(sm report.Sample, dt float64) {
		for i, n := range sm.HeldByPrio {
			out[i] += float64(n) * dt
		}
	})
	return out
}

func attributions(w *world) []report.Attribution {
	out := []report.Attribution{}
	for _, j := range w.jobs {
		if j.preemptions > 0 {
			out = append(out, report.Attribution{Job: j.spec.Ref(), Priority: j.spec.Priority, Preemptions: j.preemptions})
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
func percentiles(v []float64) report.Percentiles {
	p := report.Percentiles{Count: len(v)}
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
