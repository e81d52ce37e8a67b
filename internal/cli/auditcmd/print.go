package auditcmd

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/lockstep-dev/lockstep/internal/audit"
)

// printReport prints the report as tables, kubectl style: the workloads,
// the deadlocks, the preemptions, then the totals, the window and what
// was estimated or left out.
func printReport(out io.Writer, r *audit.Report, scope string, wide bool) {
	if len(r.Workloads) == 0 {
		fmt.Fprintf(out, "No workload in %s ran partly while holding devices in the window seen.\n", scope)
	} else {
		printWorkloads(out, r.Workloads, wide)
	}
	if len(r.Deadlocks) > 0 {
		fmt.Fprintln(out, "\nDeadlocked now — each waits for what another holds:")
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WORKLOADS\tWAITING FOR\tHELD")
		for _, d := range r.Deadlocks {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.Join(d.Workloads, ", "), strings.Join(d.Resources, ", "), held(d.Held))
		}
		_ = tw.Flush()
	}
	printPreemptions(out, r.Workloads)
	fmt.Fprintln(out)
	fmt.Fprintln(out, totals(r.Totals))
	w := r.Window
	fmt.Fprintf(out, "Window: %s to %s (%s), %s: %s.\n", w.From.Format(time.RFC3339), w.To.Format(time.RFC3339),
		duration.HumanDuration(time.Duration(w.Seconds)*time.Second), scope, w.Basis)
	for _, e := range r.Estimates {
		fmt.Fprintf(out, "Estimated: %s.\n", e)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "Note: %s.\n", n)
	}
}

func printWorkloads(out io.Writer, ws []audit.Workload, wide bool) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "NAMESPACE\tWORKLOAD\tRUNNING\tPENDING\tHELD NOW\tPARTIAL FOR\tDEVICE-HOURS\tSTATE\tLOCKSTEP")
	if wide {
		fmt.Fprint(tw, "\tSCHEDULER\tFIRST PARTIAL\tREQUIRED FROM\tFIX")
	}
	fmt.Fprintln(tw)
	for _, w := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\t%s\t%s", w.Namespace, workloadName(w), w.Now.Running+w.Now.Finished, w.Required, w.Now.Pending,
			held(w.Now.Held), duration.HumanDuration(time.Duration(w.PartialSeconds)*time.Second), hours(w.DeviceHoursHeld), state(w), verdict(w.Lockstep))
		if wide {
			first := "-"
			if w.FirstPartial != nil {
				first = w.FirstPartial.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s", w.SchedulerName, first, w.RequiredFrom, orDash(w.Lockstep.Fix))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

func printPreemptions(out io.Writer, ws []audit.Workload) {
	var any bool
	for _, w := range ws {
		any = any || len(w.Preemptions) > 0
	}
	if !any {
		return
	}
	fmt.Fprintln(out, "\nPreemptions that left a workload partly alive:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tWORKLOAD\tPOD\tREASON\tAT\tSURVIVORS\tDEVICE-HOURS AFTER")
	for _, w := range ws {
		for _, p := range w.Preemptions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", w.Namespace, workloadName(w), p.Pod, p.Reason, p.At.Format(time.RFC3339), p.Survivors, hours(p.DeviceHoursHeldAfter))
		}
	}
	_ = tw.Flush()
}

// totals is the summary line.
func totals(t audit.Totals) string {
	s := fmt.Sprintf("Total: %d workloads held %s device-hours", t.Workloads, hours(t.DeviceHoursHeld))
	if len(t.DeviceHoursHeldByResource) > 0 {
		var by []string
		for _, k := range sortedKeys(t.DeviceHoursHeldByResource) {
			by = append(by, k+" "+hours(t.DeviceHoursHeldByResource[k]))
		}
		s += " (" + strings.Join(by, ", ") + ")"
	}
	s += fmt.Sprintf(" while they could not run; %d partial now, %d deadlocked; %d preemptions left a workload partly alive; Lockstep makes (or would make) gangs of %d of them, which held %s of those device-hours.",
		t.PartialNow, t.Deadlocked, t.Preemptions, t.WouldBeGangs, hours(t.DeviceHoursHeldByWouldBeGangs))
	return s
}

// workloadName is kind/name as kubectl names objects, /gang for one gang
// of a job of several.
func workloadName(w audit.Workload) string {
	n := strings.ToLower(w.Kind) + "/" + w.Name
	if w.Gang != "" {
		n += " (gang " + w.Gang + ")"
	}
	return n
}

func state(w audit.Workload) string {
	switch {
	case w.Deadlocked:
		return "Deadlocked"
	case w.PartialNow:
		return "Partial"
	case w.PartialSeconds > 0:
		return "WasPartial"
	}
	return "Preempted"
}

func verdict(v audit.Verdict) string {
	switch {
	case v.Already:
		return "gang"
	case v.Gang:
		return "would be a gang"
	}
	return "not a gang: " + v.Reason
}

func held(h map[string]int64) string {
	if len(h) == 0 {
		return "-"
	}
	var out []string
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%d %s", h[k], k))
	}
	return strings.Join(out, ", ")
}

func hours(h float64) string { return strconv.FormatFloat(h, 'f', -1, 64) }

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
