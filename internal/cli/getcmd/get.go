// Package getcmd implements `lockstep get podgroups` (`kubectl lockstep
// get`): PodGroups as kubectl get lists them, with their members counted by
// podgroup.Resolve — the function the scheduler and explain resolve a
// group with — so the three cannot disagree on who is a member, bound,
// pending or gated; and `lockstep get compositepodgroups`: the nodes of
// scheduling trees with their parent, policy, children and the state of
// their CompositePodGroupInitiallyScheduled condition.
package getcmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/output"
	"github.com/lockstep-dev/lockstep/internal/cli/typename"
)

// podGroupTypes are the names `get` takes for Lockstep's PodGroup, as kubectl takes
// a resource's plural, singular, short and qualified names.
var podGroupTypes = []string{"podgroups", "podgroup", "pg", "podgroups.scheduling.lockstep.dev", "podgroup.scheduling.lockstep.dev"}

// Options are the flags and arguments of `lockstep get`.
type Options struct {
	Client *clientopts.Options
	Output *output.Flag
	// Names are the PodGroups (or CompositePodGroups) asked for; none
	// lists them all (Complete).
	Names []string
	// Composites: the arguments name CompositePodGroups.
	Composites bool
	// Clients are set by Complete from Client.
	Clients *clientopts.Clients
	// Now is the clock of the AGE column.
	Now func() time.Time
}

// NewOptions are the defaults: a table of the context's namespace.
func NewOptions() *Options {
	return &Options{
		Client: clientopts.ForUser(clientopts.Listing),
		Output: output.New("", "a table", "json", "yaml", "wide", "name"),
		Now:    time.Now,
	}
}

// NewCommand returns `lockstep get`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get podgroups|compositepodgroups [NAME…] | podgroup/NAME… | compositepodgroup/NAME… [-n NAMESPACE | -A] [-o json|yaml|wide|name]",
		Short: "List PodGroups (or CompositePodGroups) like kubectl get, with members bound, the state now and time to scheduled",
		Long: `List PodGroups like kubectl get, with members bound, the state now and time to scheduled.
Members are counted as the scheduler counts them: the pods of schedulerName lockstep that name
the group and that it admits, bound (or finished) and pending; -o wide adds how many of the
pending members are still gated (spec.schedulingGates).

compositepodgroups (cpg) lists the nodes of scheduling trees: each one's parent, policy and
minGroupCount, how many PodGroups and CompositePodGroups name it as their parent, and its
CompositePodGroupInitiallyScheduled condition (on a tree's root: whether the tree was admitted);
-o wide adds the disruption mode (nil means all), priority class, topology keys and the
condition's message.`,
		Example: `  lockstep get podgroups -n ml-team
  lockstep get podgroups -A -o wide
  kubectl lockstep get podgroup/train -n ml-team -o yaml
  lockstep get cpg -n ml-team -o wide`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.Client.AddFlags(cmd.Flags())
	o.Output.AddFlag(cmd.Flags())
	return cmd
}

// Complete reads the resource arguments, the kubeconfig and the namespace,
// and builds the clients.
func (o *Options) Complete(args []string) error {
	refs, err := typename.Parse(args)
	if err != nil {
		return err
	}
	o.Names = nil
	o.Composites = slices.Contains(compositeTypes, refs[0].Type)
	for _, r := range refs {
		switch {
		case o.Composites && !slices.Contains(compositeTypes, r.Type):
			return fmt.Errorf("cannot get %q with CompositePodGroups: lockstep get lists one kind at a time; run it once per kind", r.Type)
		case !o.Composites && !slices.Contains(podGroupTypes, r.Type):
			return fmt.Errorf("cannot get %q: lockstep get lists PodGroups (%s) and CompositePodGroups (%s) only; use kubectl get for other resources", r.Type, strings.Join(podGroupTypes[:3], ", "), strings.Join(compositeTypes[:3], ", "))
		}
		if r.Name != "" {
			o.Names = append(o.Names, r.Name)
		}
	}
	if err := o.Client.Complete(); err != nil {
		return err
	}
	o.Clients, err = clientopts.NewClients(o.Client.Config)
	return err
}

// Validate checks -o, and refuses -A with -n or with names.
func (o *Options) Validate() error {
	if err := o.Output.Validate(); err != nil {
		return err
	}
	return o.Client.Validate(o.Names)
}

// Run lists the PodGroups and prints them on out; like kubectl, it says on
// errOut when a table would be empty.
func (o *Options) Run(ctx context.Context, out, errOut io.Writer) error {
	if o.Composites {
		return o.runComposites(ctx, out, errOut)
	}
	rows, err := listRows(ctx, o.Clients, o.Client.Namespace, o.Names, o.Now())
	switch {
	case len(rows) == 0 && err != nil:
		return err
	case len(rows) == 0 && (o.Output.Format == "" || o.Output.Format == "wide"):
		if o.Client.AllNamespaces {
			fmt.Fprintln(errOut, "No PodGroups found.")
		} else {
			fmt.Fprintf(errOut, "No PodGroups found in namespace %s.\n", o.Client.Namespace)
		}
		return nil
	}
	if perr := printRows(out, o.Output, o.Client.AllNamespaces, rows); perr != nil {
		return perr
	}
	return err
}
