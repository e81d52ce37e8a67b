package explaincmd

import (
	"context"
	"fmt"
	"io"

	"github.com/lockstep-dev/lockstep/internal/explain"
)

// compositeKinds are the names explain takes for a CompositePodGroup.
var compositeKinds = []string{"compositepodgroup", "compositepodgroups", "cpg", "compositepodgroup.scheduling.lockstep.dev", "compositepodgroups.scheduling.lockstep.dev"}

// runTree explains the scheduling tree of a CompositePodGroup.
func (o *Options) runTree(ctx context.Context, out io.Writer) error {
	r, err := explain.RunTree(ctx, o.Clients.Kube, o.Clients.Dynamic, o.Client.Namespace, o.Name)
	if err != nil {
		return err
	}
	switch {
	case o.Output.Structured():
		return o.Output.Print(out, r)
	case o.Output.Format == "name":
		fmt.Fprintf(out, "compositepodgroup.scheduling.lockstep.dev/%s\n", o.Name)
		return nil
	}
	printTree(out, r)
	return nil
}

func printTree(out io.Writer, r *explain.TreeReport) {
	fmt.Fprintln(out, r.Answer)
	fmt.Fprintln(out)
	if r.Asked != "" {
		fmt.Fprintf(out, "%s is in the tree of %s, which the scheduler places as one unit.\n", r.Asked, r.Tree)
	}
	if c := r.Condition; c != nil {
		fmt.Fprintf(out, "1. Condition CompositePodGroupInitiallyScheduled=%s (%s): %s\n", c.Status, c.Reason, c.Message)
	} else {
		fmt.Fprintln(out, "1. Condition: none yet")
	}
	if r.Root != nil {
		fmt.Fprintln(out, "2. The tree, each node with its verdict in the scheduler's decision:")
		for _, l := range r.Root.Lines() {
			fmt.Fprintf(out, "   %s\n", l)
		}
	}
	if r.Preemption != "" {
		fmt.Fprintf(out, "3. Preemption: %s\n", r.Preemption)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "Note: %s\n", n)
	}
}
