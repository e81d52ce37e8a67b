package explaincmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/lockstep-dev/lockstep/internal/explain"
)

// runWhatIf answers for the -f manifests and prints the report.
func (o *Options) runWhatIf(ctx context.Context, out io.Writer) error {
	r, err := explain.WhatIf(ctx, o.Clients.Kube, o.Clients.Dynamic, o.sources, explain.WhatIfOptions{Namespace: o.Client.Namespace})
	if err != nil {
		return err
	}
	switch {
	case o.Output.Structured():
		return o.Output.Print(out, r)
	case o.Output.Format == "name":
		kind, name, _ := strings.Cut(r.Job, " ")
		_, name, _ = strings.Cut(name, "/")
		fmt.Fprintf(out, "%s/%s\n", strings.ToLower(kind), name)
		return nil
	}
	printWhatIf(out, r, o.Output.Format == "wide")
	return nil
}

// printWhatIf prints the answer, then each unit and where it would go,
// what a preemption would evict, why nodes refuse, and the notes.
func printWhatIf(out io.Writer, r *explain.WhatIfReport, wide bool) {
	fmt.Fprintln(out, r.Answer)
	fmt.Fprintln(out)
	if r.Tree != "" {
		fmt.Fprintf(out, "Its groups hang under %s: the scheduler places them as one unit.\n", r.Tree)
	}
	if len(r.Units) > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "UNIT\tPODS\tMINCOUNT\tPLACEABLE\tNODES\tWHERE")
		n := shown(len(r.Units), wide)
		for _, u := range r.Units[:n] {
			where := strings.Join(u.Where, ", ")
			if where == "" {
				where = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", u.Name, u.Pods, u.MinCount, u.Placeable, u.NodeCount, where)
		}
		tw.Flush()
		more(out, len(r.Units), n, "units")
	}
	if r.Preemption != "" {
		fmt.Fprintf(out, "Preemption: %s\n", r.Preemption)
	}
	if len(r.Reasons) > 0 {
		fmt.Fprintf(out, "Nodes (%d) rejecting the first pod that does not fit:\n", r.Nodes)
		for _, rc := range r.Reasons {
			fmt.Fprintf(out, "   %d  %s\n", rc.Nodes, rc.Reason)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "Note: %s\n", n)
	}
	fmt.Fprintln(out, "Nothing was created.")
}
