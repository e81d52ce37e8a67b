// Package auditcmd implements `lockstep audit` (`kubectl lockstep audit`):
// it lists a cluster's pods, their claims, the jobs that own them and
// Preempted events — list is the only verb it uses, so it writes nothing
// and needs no Lockstep component — and prints internal/audit's report of
// the workloads that ran partly while holding devices.
package auditcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/audit"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/output"
)

// Options are the flags of `lockstep audit`.
type Options struct {
	Client *clientopts.Options
	Output *output.Flag
	// Grace is audit.Options.Grace.
	Grace time.Duration
	// Clients are set by Complete from Client.
	Clients *clientopts.Clients
	// Now is the time of the audit.
	Now func() time.Time
}

// NewOptions are the defaults: a table of the context's namespace.
func NewOptions() *Options {
	return &Options{
		Client: clientopts.ForUser(clientopts.Listing),
		Output: output.New("", "a table", "json", "yaml", "wide"),
		Grace:  audit.DefaultGrace,
		Now:    time.Now,
	}
}

// NewCommand returns `lockstep audit`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit [-n NAMESPACE | -A] [-o wide|json|yaml] [--grace DURATION]",
		Short: "Read a cluster and report the workloads that ran partly while holding devices: device-hours held, deadlocks, preemptions",
		Long: `Read a cluster and report every workload — Job, JobSet, PyTorchJob and the other Kubeflow jobs,
MPIJob, RayCluster, LeaderWorkerSet, PodGroup, or pods of another controller — that ran some of
its pods while others it needs were pending, holding devices (extended resources of device
plugins, DRA claims): the device-hours held while it could not run, the workloads deadlocked now
(each needing what another holds), preemptions that left one partly alive, and whether Lockstep
makes (or would make) it gangs. It only lists (the read-only ClusterRole lockstep-audit in
docs/audit-clusterrole.yaml grants what it needs) and needs no Lockstep component installed.

The history is reconstructed from the objects that still exist: pods deleted before the audit are
not seen, and the report says which window it could see and what it estimated.`,
		Example: `  lockstep audit -A
  lockstep audit -n ml-team -o json
  kubectl lockstep audit -A -o wide --grace 1m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
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
	cmd.Flags().DurationVar(&o.Grace, "grace", o.Grace, "how long a start takes: partial episodes shorter than this that ended whole (a scheduler binding a job pod by pod) are not counted, and pods created after a workload ran whole this long, growing it, are a scale-up")
	return cmd
}

// Complete reads the kubeconfig and the namespace, and builds the clients.
func (o *Options) Complete() error {
	if err := o.Client.Complete(); err != nil {
		return err
	}
	var err error
	o.Clients, err = clientopts.NewClients(o.Client.Config)
	return err
}

// Validate checks -o, -A with -n, and --grace.
func (o *Options) Validate() error {
	if err := o.Output.Validate(); err != nil {
		return err
	}
	if o.Grace <= 0 {
		return fmt.Errorf("--grace %s: must be a positive duration (e.g. 30s), the time a start may take", o.Grace)
	}
	return o.Client.Validate(nil)
}

// Run reads the cluster, audits it and prints the report.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	in, err := read(ctx, o.Clients, o.Client.Namespace, o.Now())
	if err != nil {
		return err
	}
	r := audit.Analyze(ctx, *in, audit.Options{Grace: o.Grace})
	if o.Output.Structured() {
		return o.Output.Print(out, r)
	}
	printReport(out, r, o.scope(), o.Output.Format == "wide")
	return nil
}

// scope says what the audit read, for the table.
func (o *Options) scope() string {
	if o.Client.AllNamespaces {
		return "all namespaces"
	}
	return "namespace " + o.Client.Namespace
}
