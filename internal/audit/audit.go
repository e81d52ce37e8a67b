package audit

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Analyze reconstructs the input's workloads and reports those that were
// partial while holding devices. It reads nothing but in; ctx is passed to
// the integrations' OwnerOf, which reads the input's objects.
func Analyze(ctx context.Context, in Input, opts Options) *Report {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	set := integrations.All()
	ci := newClaimIndex(&in)
	ws, skipped := group(ctx, in.Pods, index(&in), set, podGroups(in.PodGroups))
	as := make([]*analysis, 0, len(ws))
	for _, w := range ws {
		w.judge(set)
		for _, sub := range w.split() {
			as = append(as, newAnalysis(sub, ci, in.Now))
		}
	}
	unattributed := attributeEvents(as, in.Events)
	for _, a := range as {
		a.reconstruct(in.Now, opts.Grace)
	}
	findPreemptions(as, opts.Grace)
	r := &Report{Deadlocks: findDeadlocks(as), Workloads: []Workload{}, Estimates: []string{}, Notes: slices.Clone(in.Notes)}
	if r.Deadlocks == nil {
		r.Deadlocks = []Deadlock{}
	}
	r.Totals.DeviceHoursHeldByResource = map[string]float64{}
	deviceless := 0
	for _, a := range as {
		if !a.reportable() {
			if a.partialDeviceless() {
				deviceless++
			}
			continue
		}
		r.add(a.report())
	}
	sort.SliceStable(r.Workloads, func(i, j int) bool { return workloadKey(r.Workloads[i]) < workloadKey(r.Workloads[j]) })
	r.Window = window(&in)
	r.Notes = append(r.Notes, notes(skipped, deviceless, unattributed)...)
	if r.Notes == nil {
		r.Notes = []string{}
	}
	return r
}

// podGroups indexes the groups by namespace/name; where the API server's
// and Lockstep's share a name, Lockstep's wins, as in the scheduler.
func podGroups(list []*lockv1.PodGroup) map[string]*lockv1.PodGroup {
	out := map[string]*lockv1.PodGroup{}
	for _, pg := range list {
		k := pg.Namespace + "/" + pg.Name
		if old := out[k]; old == nil || podgroup.Upstream(old) {
			out[k] = pg
		}
	}
	return out
}

func (r *Report) add(w Workload) {
	r.Workloads = append(r.Workloads, w)
	t := &r.Totals
	t.Workloads++
	if w.PartialNow {
		t.PartialNow++
	}
	if w.Deadlocked {
		t.Deadlocked++
	}
	t.Preemptions += len(w.Preemptions)
	if w.Lockstep.Gang {
		t.WouldBeGangs++
		t.DeviceHoursHeldByWouldBeGangs = round(t.DeviceHoursHeldByWouldBeGangs + w.DeviceHoursHeld)
	}
	t.DeviceHoursHeld = round(t.DeviceHoursHeld + w.DeviceHoursHeld)
	for k, v := range w.DeviceHoursHeldByResource {
		t.DeviceHoursHeldByResource[k] = round(t.DeviceHoursHeldByResource[k] + v)
	}
	for _, e := range w.Estimated {
		if !slices.Contains(r.Estimates, e) {
			r.Estimates = append(r.Estimates, e)
			sort.Strings(r.Estimates)
		}
	}
}

// window spans the earliest creation among the pods (and the earliest
// preemption event) to the audit.
func window(in *Input) Window {
	from := in.Now
	for _, p := range in.Pods {
		if t := p.CreationTimestamp.Time; !t.IsZero() && t.Before(from) {
			from = t
		}
	}
	for _, e := range in.Events {
		if t := eventTime(e); e.Reason == PreemptedReason && !t.IsZero() && t.Before(from) {
			from = t
		}
	}
	return Window{From: from, To: in.Now, Seconds: in.Now.Sub(from).Round(time.Second).Seconds(), Basis: WindowBasis}
}

func notes(skipped map[string]int, deviceless, unattributed int) []string {
	var out []string
	var reasons []string
	for r := range skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		out = append(out, fmt.Sprintf("%d pods not audited: %s", skipped[r], r))
	}
	if deviceless > 0 {
		out = append(out, fmt.Sprintf("%d workloads were partial holding no devices (no extended resource, no DRA claim): not reported", deviceless))
	}
	if unattributed > 0 {
		out = append(out, fmt.Sprintf("%d Preempted events name pods that are gone and could not be tied to a workload", unattributed))
	}
	return out
}

func workloadKey(w Workload) string {
	return w.Namespace + "/" + w.Kind + "/" + w.Name + "/" + w.Gang
}
