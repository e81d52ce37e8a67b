package getcmd

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/lockstep-dev/lockstep/internal/cli/output"
)

// printRows prints rows as kubectl get would in the flag's format; all
// adds the NAMESPACE column.
func printRows(out io.Writer, o *output.Flag, all bool, rows []Row) error {
	switch {
	case o.Structured():
		return o.Print(out, rows)
	case o.Format == "name":
		for _, r := range rows {
			fmt.Fprintf(out, "podgroup.scheduling.lockstep.dev/%s\n", r.Name)
		}
		return nil
	}
	wide := o.Format == "wide"
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	if all {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprint(tw, "NAME\tPOLICY\tMINCOUNT\tBOUND/MEMBERS\tSCHEDULED\tREASON\tSTATE\tINCARNATION\tAGE\tTIME-TO-SCHEDULED")
	if wide {
		fmt.Fprint(tw, "\tPENDING\tGATED\tDISRUPTION\tPRIORITY-CLASS\tTOPOLOGY\tMESSAGE")
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		if all {
			fmt.Fprintf(tw, "%s\t", r.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\t%d\t%s\t%s", r.Name, r.Policy, r.MinCount, r.Bound, r.Members, r.Status, r.Reason, r.State, r.Incarnation, r.Age, r.TimeToScheduled)
		if wide {
			fmt.Fprintf(tw, "\t%d\t%d\t%s\t%s\t%s\t%s", r.Pending, r.Gated, r.Disruption, orDash(r.PriorityClass), orDash(r.Topology), r.StateMessage)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
