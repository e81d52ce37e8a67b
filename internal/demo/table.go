package demo

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// printTable prints one scenario across the modes: per job, pods Running
// and Pending, accelerators held, those held by jobs that cannot run, and
// how many jobs can train.
func printTable(out io.Writer, sc scenario, results []Result) {
	fmt.Fprintf(out, "\n%s:\n", sc.title)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	u := strings.ToUpper(sc.acc.unit())
	fmt.Fprintf(tw, "SCHEDULER\tJOB\tPRIORITY\tRUNNING\tPENDING\t%s HELD\t%s HELD BY A JOB THAT CANNOT RUN\tJOBS TRAINING\n", u, u)
	for _, r := range results {
		jobs := r.Scenario(sc.name).Jobs
		training, idle := 0, 0
		for _, j := range jobs {
			if j.trains() {
				training++
			} else {
				idle += j.Held
			}
		}
		for i, j := range jobs {
			name, idleCol, trainCol := "", "", ""
			if i == 0 {
				name = r.Mode
				idleCol = fmt.Sprint(idle)
				trainCol = fmt.Sprintf("%d of %d", training, len(jobs))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%d\t%d\t%s\t%s\n", name, j.Job, j.Priority, j.Running, ranks, j.Pending, j.Held, idleCol, trainCol)
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(out, strings.TrimSpace(sc.moral))
}
