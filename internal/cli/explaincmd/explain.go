// Package explaincmd implements `lockstep explain` (`kubectl lockstep
// explain`): why a gang or pod is pending, the answer first, then the
// evidence, as internal/explain computes it.
package explaincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/output"
	"github.com/lockstep-dev/lockstep/internal/cli/typename"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

// Options are the flags and arguments of `lockstep explain`.
type Options struct {
	Client *clientopts.Options
	Output *output.Flag
	// Kind and Name are the TYPE NAME argument (Complete).
	Kind, Name string
	// Files are manifests of something not yet created (-f; "-":
	// standard input): the what-if.
	Files   []string
	stdin   io.Reader
	sources []workload.Source
	// Clients are set by Complete from Client.
	Clients *clientopts.Clients
}

// NewOptions are the defaults: the report, in the context's namespace.
func NewOptions() *Options {
	return &Options{Client: clientopts.ForUser(clientopts.Namespaced), Output: output.New("", "the report", "json", "yaml", "wide", "name"), stdin: os.Stdin}
}

// NewCommand returns `lockstep explain`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain (podgroup|compositepodgroup|pod|JOB-KIND) NAME | TYPE/NAME | -f FILE [-n NAMESPACE] [-o json|yaml|wide|name]",
		Short: "Say why a gang (a PodGroup, or a job such as a Job, JobSet or TrainJob) or pod is pending: the answer first, then the evidence",
		Long: `Say why a gang (a PodGroup, or a job such as a Job, JobSet or TrainJob) or pod is pending: the answer first, then the evidence.
A job resolves to its PodGroup: with several gangs (per replicated job, per LeaderWorkerSet
replica), the first that is not running whole; a TrainJob to the gangs of the JobSet it runs as.
Job kinds: ` + strings.Join(explain.JobKinds(), ", ") + `.

A CompositePodGroup (compositepodgroup, cpg) resolves to its scheduling tree: the tree is drawn
from its root with each node's verdict in the scheduler's decision, after the root's arithmetic.

With -f FILE (repeatable; - for standard input) it answers for something not yet created — a
job of any of those kinds, a PodGroup with its pods, or a pod, with the PriorityClasses,
ResourceClaimTemplates and ResourceClaims it names that the cluster lacks — as the scheduler
would decide it now: fits now and where (the domain of each topology level), fits after
preempting what, or what blocks it. Nothing is written to the cluster; objects without a
namespace are read in -n's.

Lists of evidence (claims, nodes with matching devices, tainted devices) show their first
` + fmt.Sprint(listLimit) + ` entries; -o wide shows all of them, -o json|yaml all of them as data.`,
		Example: `  lockstep explain podgroup train-b -n ml-team
  kubectl lockstep explain job/train -n ml-team -o yaml
  lockstep explain jobset llama-pretrain -n ml-team
  lockstep explain compositepodgroup/job -n ml-team
  lockstep explain -f train.yaml -n ml-team`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.Client.AddFlags(cmd.Flags())
	o.Output.AddFlag(cmd.Flags())
	cmd.Flags().StringArrayVarP(&o.Files, "filename", "f", o.Files, "manifests of something not yet created, to answer whether it would fit (repeatable; - for standard input)")
	cmd.Flags().Var(podgroup.DefaultCapacityTypesFlag{}, "default-capacity-types", podgroup.DefaultCapacityTypesUsage+" (give it the scheduler's value if the chart changed it)")
	return cmd
}

// Complete reads TYPE NAME (or TYPE/NAME), the kubeconfig and the
// namespace, and builds the clients.
func (o *Options) Complete(args []string) error {
	if len(o.Files) > 0 {
		if len(args) > 0 {
			return fmt.Errorf("explain takes TYPE NAME or -f FILE, not both; got %q and -f %s", strings.Join(args, " "), strings.Join(o.Files, ", "))
		}
		sources, err := workload.ReadSources(o.Files, o.stdin)
		if err != nil {
			return fmt.Errorf("reading -f: %w", err)
		}
		o.sources = sources
		return o.completeClients()
	}
	if len(args) == 0 {
		return errors.New("explain takes one TYPE NAME or TYPE/NAME, e.g. `explain podgroup train` or `explain job/train`, or -f FILE for something not yet created")
	}
	refs, err := typename.Parse(args)
	if err != nil {
		return err
	}
	if len(refs) != 1 || refs[0].Name == "" {
		return fmt.Errorf("explain takes one TYPE NAME or TYPE/NAME, e.g. `explain podgroup train` or `explain job/train`; got %q", strings.Join(args, " "))
	}
	o.Kind, o.Name = refs[0].Type, refs[0].Name
	return o.completeClients()
}

// completeClients reads the kubeconfig and the namespace and builds the
// clients.
func (o *Options) completeClients() error {
	if err := o.Client.Complete(); err != nil {
		return err
	}
	var err error
	o.Clients, err = clientopts.NewClients(o.Client.Config)
	return err
}

// Validate checks -o.
func (o *Options) Validate() error {
	return o.Output.Validate()
}

// Run explains the target and prints the report.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	if o.sources != nil {
		return o.runWhatIf(ctx, out)
	}
	if slices.Contains(compositeKinds, o.Kind) {
		return o.runTree(ctx, out)
	}
	r, err := explain.Run(ctx, o.Clients.Kube, o.Clients.Dynamic, explain.Target{Kind: o.Kind, Namespace: o.Client.Namespace, Name: o.Name})
	if err != nil {
		return err
	}
	switch {
	case o.Output.Structured():
		return o.Output.Print(out, r)
	case o.Output.Format == "name":
		fmt.Fprintln(out, r.UnitRef())
		return nil
	}
	printReport(out, r, o.Output.Format == "wide")
	return nil
}
