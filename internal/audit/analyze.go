package audit

import (
	"math"
	"slices"
	"sort"
	"time"
)

// analysis is one workload's reconstruction.
type analysis struct {
	w     *workload
	spans []*span
	segs  []segment
	// required is the workload's requirement, every pod it had at once
	// (maxAlive) when it states none.
	required int
	// counted are the partial episodes that count.
	counted    []episode
	partialNow bool
	// last is its state at the audit (zero: no pod existed at the end).
	last segment
	// needs are the resources its unschedulable needed pods ask for, when
	// partial now.
	needs       devices
	preemptions []Preemption
	waitsFor    []string
	deadlocked  bool
}

// newAnalysis reads the spans of the workload's pods.
func newAnalysis(w *workload, ci claimIndex, now time.Time) *analysis {
	a := &analysis{w: w}
	for _, p := range w.pods {
		a.spans = append(a.spans, spanOf(p, ci, now))
	}
	return a
}

// reconstruct sweeps the spans (with those of gone pods attributeEvents
// added) and keeps the partial episodes that count: those of grace or
// more, and one going on now whose waiting pods the scheduler found
// unschedulable.
func (a *analysis) reconstruct(now time.Time, grace time.Duration) {
	segs, maxAlive := sweep(a.spans, now, grace)
	a.segs = segs
	a.required = a.w.required
	if a.required == 0 {
		a.required = maxAlive
	}
	if n := len(segs); n > 0 && !segs[n-1].to.Before(now) {
		a.last = segs[n-1]
	}
	blocked := a.blockedNeeds()
	for _, e := range episodes(segs, a.w.required, now) {
		if e.seconds() >= grace.Seconds() || e.ongoing && len(blocked) > 0 {
			a.counted = append(a.counted, e)
			a.partialNow = a.partialNow || e.ongoing
		}
	}
	if a.partialNow {
		a.needs = blocked
	}
}

// blockedNeeds are the devices the needed pods still pending ask for that
// the scheduler found unschedulable.
func (a *analysis) blockedNeeds() devices {
	d := devices{}
	for _, s := range a.spans {
		if !s.needed || s.gone || s.bound != nil || s.end != nil || !unschedulable(s.pod) {
			continue
		}
		d.add(s.extended, 1)
		for _, c := range s.claims {
			d.add(c.devices, 1)
		}
	}
	return d
}

// hours are the device-hours of the counted episodes, in all and by
// resource.
func (a *analysis) hours() (float64, map[string]float64) {
	by := map[string]float64{}
	var all float64
	for _, e := range a.counted {
		for r, s := range e.deviceSeconds {
			by[r] += s / 3600
			all += s / 3600
		}
	}
	for r, h := range by {
		by[r] = round(h)
	}
	return round(all), by
}

// reportable: it held devices while partial, or a preemption left it
// partly alive holding devices.
func (a *analysis) reportable() bool {
	all, _ := a.hours()
	return all > 0 || a.partialNow && len(a.last.held) > 0 || len(a.preemptions) > 0
}

// partialDeviceless: partial in a counted episode without holding any
// device (cpu and memory only), which the audit does not report.
func (a *analysis) partialDeviceless() bool { return len(a.counted) > 0 && !a.reportable() }

func (a *analysis) report() Workload {
	w := a.w
	all, by := a.hours()
	out := Workload{
		Namespace: w.ref.Namespace, APIVersion: w.ref.APIVersion, Kind: w.ref.Kind, Name: w.ref.Name, Gang: w.gang,
		Required: a.required, RequiredFrom: w.requiredFrom,
		Now:        State{Running: a.last.holding, Finished: a.last.done, Pending: a.last.pending, Held: map[string]int64(a.last.held.clone())},
		PartialNow: a.partialNow, Deadlocked: a.deadlocked, WaitsFor: a.waitsFor,
		DeviceHoursHeld: all, DeviceHoursHeldByResource: by,
		Preemptions: a.preemptions, Lockstep: w.verdict,
	}
	if len(w.pods) > 0 {
		out.SchedulerName = w.pods[0].Spec.SchedulerName
		out.Pods = len(w.pods)
	}
	var secs float64
	for i, e := range a.counted {
		secs += e.seconds()
		if i == 0 {
			out.FirstPartial = ptrTime(e.from)
		}
		if e.ongoing {
			out.PartialSince = ptrTime(e.from)
		}
	}
	out.PartialSeconds = math.Round(secs)
	out.Estimated = a.estimated()
	return out
}

func (a *analysis) estimated() []string {
	var out []string
	for _, s := range a.spans {
		for _, e := range s.estimated {
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	sort.Strings(out)
	return out
}

func ptrTime(t time.Time) *time.Time { return &t }

// round keeps device-hours to 1/10,000 (0.36 device-seconds).
func round(h float64) float64 { return math.Round(h*1e4) / 1e4 }
