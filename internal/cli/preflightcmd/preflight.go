// Package preflightcmd implements `lockstep preflight` (`kubectl lockstep
// preflight`): internal/preflight's checks of a cluster, printed, with a
// non-zero exit when one failed.
package preflightcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/output"
	"github.com/lockstep-dev/lockstep/internal/preflight"
)

// ErrFailed makes the command exit non-zero when a check failed.
var ErrFailed = errors.New("preflight found problems that would make gangs or DRA fail")

// Options are the flags of `lockstep preflight`.
type Options struct {
	// Client has no -n: preflight reads the whole cluster.
	Client *clientopts.Options
	Output *output.Flag
	// Probe configures the Job probe.
	Probe preflight.Options
	// Clients are set by Complete from Client.
	Clients *clientopts.Clients
}

// NewOptions are the defaults: tables.
func NewOptions() *Options {
	return &Options{Client: clientopts.ForUser(clientopts.Cluster), Output: output.New("table", "", "table", "json", "yaml")}
}

// NewCommand returns `lockstep preflight`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "preflight [-o table|json|yaml]",
		Short: "Check a cluster for gang scheduling and DRA: APIs, the Job field end to end, Lockstep, DRA features, drivers, oversubscription, EKS node supply, Spot, EFA and alignment",
		Long: `Reads the cluster and reports, each with its fix, what would make gangs fail or run
misaligned. It exits 1 when a check fails (status fail, or a node where a DRA driver and a device
plugin hand out the same devices), 0 otherwise; warnings do not change the exit code.

It writes nothing lasting: the DRA feature probes are server-side dry runs, and where the API
server keeps Job spec.scheduling, a suspended probe Job (label ` + preflight.ProbeLabel + `) shows
whether kube-controller-manager acts on it, and is deleted before preflight returns.`,
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
	cmd.Flags().StringVar(&o.Probe.ProbeNamespace, "probe-namespace", "default", "namespace of the Job probe (a suspended Job, deleted before preflight returns)")
	cmd.Flags().DurationVar(&o.Probe.ProbeTimeout, "probe-timeout", 30*time.Second, "how long to wait for kube-controller-manager to act on the Job probe")
	return cmd
}

// Complete reads the kubeconfig and builds the clients.
func (o *Options) Complete() error {
	if err := o.Client.Complete(); err != nil {
		return err
	}
	var err error
	o.Clients, err = clientopts.NewClients(o.Client.Config)
	return err
}

// Validate checks -o and the probe flags.
func (o *Options) Validate() error {
	if o.Probe.ProbeTimeout <= 0 {
		return fmt.Errorf("--probe-timeout %s: must be positive", o.Probe.ProbeTimeout)
	}
	return o.Output.Validate()
}

// Run checks the cluster and prints the report; it returns ErrFailed when
// a check failed.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	r, err := preflight.Run(ctx, o.Clients.Kube, o.Clients.Dynamic, o.Probe)
	if err != nil {
		return err
	}
	if o.Output.Structured() {
		if err := o.Output.Print(out, r); err != nil {
			return err
		}
	} else {
		printTable(out, r)
	}
	if r.Failed() {
		return ErrFailed
	}
	return nil
}

func printTable(out io.Writer, r *preflight.Report) {
	fmt.Fprintf(out, "Kubernetes %s\n\n", r.KubernetesVersion)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL\tFIX")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Status, c.Detail, c.Fix)
	}
	_ = tw.Flush()
	if len(r.DRAFeatures) > 0 {
		fmt.Fprintln(out, "\nDRA features beyond the GA core (\"DRA is GA\" says nothing about these):")
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FEATURE\tGATE\tTHIS CLUSTER\tLOCKSTEP USES IT TO\tWITHOUT IT")
		for _, f := range r.DRAFeatures {
			without := f.Without
			if f.Cluster == preflight.Served {
				without = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Feature, f.Gate, f.Cluster, f.Lockstep, without)
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(out, "\nDRA drivers:")
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DRIVER\tNODES\tDEVICES")
	for _, d := range r.Drivers {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", d.Name, d.Nodes, d.Devices)
	}
	_ = tw.Flush()
	if len(r.Overlaps) > 0 {
		fmt.Fprintln(out, "\nSilent oversubscription risk — a DRA driver and a device plugin advertise the same device:")
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tDRA DRIVER\tEXTENDED RESOURCE\tFIX")
		for _, o := range r.Overlaps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Node, o.Driver, o.ExtendedResource, o.Fix)
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(out, "\nNode pools (how nodes are supplied decides DRA driver or device plugin):")
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tSUPPLY MODEL\tNODES\tUSE\tWHY")
	for _, p := range r.Pools {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", p.Name, p.SupplyModel, p.Nodes, p.Recommendation, p.Why)
	}
	_ = tw.Flush()
}
