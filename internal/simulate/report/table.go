package report

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the report as tables: one column per scheduler; with
// jobs, every job's fate under each scheduler too.
func WriteTable(out io.Writer, r *Report, jobs bool) error {
	var b bytes.Buffer
	if err := writeTable(&b, r, jobs); err != nil {
		return err
	}
	// tabwriter pads empty last cells: no trailing blanks.
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		if _, err := io.WriteString(out, strings.TrimRight(l, " \n")+strings.Repeat("\n", strings.Count(l, "\n"))); err != nil {
			return err
		}
	}
	return nil
}

func writeTable(out io.Writer, r *Report, jobs bool) error {
	fmt.Fprintf(out, "Cluster %s: %d nodes, %d devices; domains by %s: %s\n", orDash(r.Cluster.Name), r.Cluster.Nodes, r.Cluster.Devices,
		r.Cluster.DomainLabel, strings.Join(r.Cluster.Domains, ", "))
	gangs := fmt.Sprintf("%d gangs", r.Workload.GangJobs)
	if r.Workload.TreeJobs > 0 {
		gangs += fmt.Sprintf(", %d of them scheduling trees", r.Workload.TreeJobs)
	}
	fmt.Fprintf(out, "Workload: %d jobs (%s), %d pods, %d failures; measured over %s\n\n", r.Workload.Jobs, gangs,
		r.Workload.Pods, r.Workload.Failures, dur(r.HorizonSeconds))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(label string, f func(s SchedulerReport) string) {
		cells := []string{label}
		for _, s := range r.Schedulers {
			cells = append(cells, f(s))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	section := func(label string) { row(label, func(SchedulerReport) string { return "" }) }
	row("", func(s SchedulerReport) string { return s.Name })
	row("jobs completed", func(s SchedulerReport) string { return fmt.Sprintf("%d/%d", s.JobsCompleted, s.Jobs) })
	row("never started (deadlocked, never fit)", func(s SchedulerReport) string {
		return fmt.Sprintf("%d (%d, %d)", s.JobsNeverStarted, s.JobsDeadlocked, s.JobsNeverFit)
	})
	row("makespan", func(s SchedulerReport) string {
		if s.MakespanSeconds == nil {
			return "— (not all completed)"
		}
		return dur(*s.MakespanSeconds)
	})
	row("wait p50 / p95 / p99", func(s SchedulerReport) string { return pct(s.WaitSeconds) })
	row("completion p50 / p95 / p99", func(s SchedulerReport) string { return pct(s.CompletionSeconds) })
	row("devices used by running jobs", func(s SchedulerReport) string {
		return fmt.Sprintf("%.1f%% (%.1f device-h)", 100*s.DeviceUtilization, s.DeviceHoursRunning)
	})
	row("devices held by jobs not running", func(s SchedulerReport) string {
		return fmt.Sprintf("%.1f%% (%.1f device-h)", 100*s.DeviceHeldIdleFraction, s.DeviceHoursHeldIdle)
	})
	row("preemptions (victim pods)", func(s SchedulerReport) string { return fmt.Sprintf("%d (%d)", s.Preemptions, s.PreemptedPods) })
	row("short waits instead", func(s SchedulerReport) string { return fmt.Sprint(s.ShortWaits) })
	row("device-h of runs preemption cut short", func(s SchedulerReport) string { return fmt.Sprintf("%.1f", s.PreemptionDeviceHoursLost) })
	row("gang restarts after a lost member", func(s SchedulerReport) string { return fmt.Sprint(s.GangRestarts) })
	row("device-h of runs failures cut short", func(s SchedulerReport) string { return fmt.Sprintf("%.1f", s.FailureDeviceHoursLost) })
	if len(r.Schedulers) > 0 {
		section("largest free block (mean, min) by domain")
		for i, d := range r.Schedulers[0].Fragmentation {
			row("  "+d.Domain, func(s SchedulerReport) string {
				f := s.Fragmentation[i]
				return fmt.Sprintf("%.1f, %d (of %.1f free)", f.MeanLargestFreeBlock, f.MinLargestFreeBlock, f.MeanFree)
			})
		}
		section("seed 002: time to initially scheduled")
		row("  p50 / p95 / p99", func(s SchedulerReport) string { return pct(s.Seed002.TimeToInitiallyScheduledSeconds) })
		section("seed 002: pending groups by priority (mean, max)")
		for i, p := range r.Workload.Priorities {
			row(fmt.Sprintf("  priority %d", p), func(s SchedulerReport) string {
				pb := s.Seed002.PendingGroupsByPriority[i]
				return fmt.Sprintf("%.2f, %d", pb.Mean, pb.Max)
			})
		}
		section("seed 002: preemptions attributed to a group")
		row("  preemptors (top one)", func(s SchedulerReport) string { return topPreemptor(s.Seed002.PreemptionsAttributed) })
		section("seed 002: device allocation failures by class")
		for _, c := range allClasses(r) {
			row("  "+c, func(s SchedulerReport) string { return fmt.Sprint(classFailures(s, c)) })
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Workload.Priorities) > 1 {
		if err := writeByPriority(out, r); err != nil {
			return err
		}
	}
	if jobs {
		return writeJobs(out, r)
	}
	return nil
}

func writeByPriority(out io.Writer, r *Report) error {
	fmt.Fprintln(out, "\nBy priority:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULER\tPRIORITY\tJOBS\tCOMPLETED\tNEVER STARTED\tMAKESPAN\tWAIT P50 / P95 / P99\tCOMPLETION P50 / P95 / P99\tHELD IDLE (device-h)\tPREEMPTED (device-h lost)")
	for _, s := range r.Schedulers {
		for _, p := range s.ByPriority {
			makespan := "—"
			if p.MakespanSeconds != nil {
				makespan = dur(*p.MakespanSeconds)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%.1f\t%d (%.1f)\n", s.Name, p.Priority, p.Jobs, p.JobsCompleted, p.JobsNeverStarted, makespan,
				pct(p.WaitSeconds), pct(p.CompletionSeconds), p.DeviceHoursHeldIdle, p.Preempted, p.PreemptionDeviceHoursLost)
		}
	}
	return tw.Flush()
}

// writeJobs prints each job's fate under each scheduler, in start order
// (jobs that never started last, by arrival).
func writeJobs(out io.Writer, r *Report) error {
	for _, s := range r.Schedulers {
		fmt.Fprintf(out, "\nJobs under %s:\n", s.Name)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ORDER\tJOB\tARRIVAL\tSTART\tEND\tSTATE\tNODES (of its first run; else where it holds devices)")
		jobs := append([]JobReport(nil), s.JobDetails...)
		sort.SliceStable(jobs, func(i, j int) bool {
			a, b := jobs[i], jobs[j]
			if (a.StartOrder == 0) != (b.StartOrder == 0) {
				return a.StartOrder != 0
			}
			return a.StartOrder < b.StartOrder
		})
		for _, j := range jobs {
			order := "-"
			if j.StartOrder > 0 {
				order = fmt.Sprint(j.StartOrder)
			}
			extra := ""
			if j.DevicesHeld > 0 && j.State != JobRunning {
				extra = fmt.Sprintf(", holding %d devices", j.DevicesHeld)
			}
			if j.Restarts > 0 || j.Preempted > 0 {
				extra += fmt.Sprintf(" (restarts %d, preempted %d)", j.Restarts, j.Preempted)
			}
			nodes := j.Nodes
			if j.StartOrder == 0 {
				nodes = j.HeldOn
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s%s\t%s\n", order, j.Job, dur(j.ArrivalSeconds), FormatSeconds(j.StartSeconds), FormatSeconds(j.EndSeconds),
				j.State, extra, FormatNodes(nodes))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// FormatNodes writes a job's nodes as the table does: repeats folded
// ("worker-0 ×2, worker-1 ×2"), "-" for none.
func FormatNodes(nodes []string) string {
	if len(nodes) == 0 {
		return "-"
	}
	var parts []string
	for i := 0; i < len(nodes); {
		j := i
		for j < len(nodes) && nodes[j] == nodes[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", nodes[i], j-i))
		} else {
			parts = append(parts, nodes[i])
		}
		i = j
	}
	return strings.Join(parts, ", ")
}

func topPreemptor(as []Attribution) string {
	if len(as) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (%s: %d)", len(as), as[0].Job, as[0].Preemptions)
}

func allClasses(r *Report) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range r.Schedulers {
		for _, c := range s.Seed002.DeviceAllocationFailures {
			if !seen[c.DeviceClass] {
				seen[c.DeviceClass] = true
				out = append(out, c.DeviceClass)
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		out = []string{"(none)"}
	}
	return out
}

func classFailures(s SchedulerReport, class string) int {
	for _, c := range s.Seed002.DeviceAllocationFailures {
		if c.DeviceClass == class {
			return c.Decisions
		}
	}
	return 0
}

func pct(p Percentiles) string {
	if p.Count == 0 {
		return "—"
	}
	return dur(*p.P50) + " / " + dur(*p.P95) + " / " + dur(*p.P99)
}

// dur prints seconds as a Go duration, to the second (to the millisecond
// below a minute).
func dur(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	if d < time.Minute {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// FormatSeconds writes a duration in seconds as the table does ("-"
// when there is none).
func FormatSeconds(sec *float64) string {
	if sec == nil {
		return "-"
	}
	return dur(*sec)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
