// Package democmd implements `lockstep demo` (`make demo`): seed 004's
// scenarios on local clusters of its own under three schedulers, compared.
package democmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/cli/dev"
	"github.com/lockstep-dev/lockstep/internal/demo"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// Options are the flags of `lockstep demo`. The demo starts and stops its
// own clusters: it takes no kubeconfig.
type Options struct {
	Demo demo.Options
}

// NewOptions are the defaults `make demo` runs with.
func NewOptions() *Options {
	return &Options{Demo: demo.Options{StateDir: ".lockstep/demo", BasePort: 16553, Quiet: 6 * time.Second}}
}

// NewCommand returns `lockstep demo`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run seed 004's deadlock and preemption scenarios under kube-scheduler pod by pod, kube-scheduler's in-tree gang, and Lockstep, and compare",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(cmd.OutOrStdout()); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Demo.StateDir, "state-dir", o.Demo.StateDir, "where the demo's local clusters keep their state")
	f.IntVar(&o.Demo.BasePort, "base-port", o.Demo.BasePort, fmt.Sprintf("API server port of the first demo cluster; the clusters run side by side, each on the next ports (%d ports from it in all)", demo.PortCount))
	f.StringVar(&o.Demo.BinDir, "bin-dir", o.Demo.BinDir, "directory holding the Kubernetes binaries (default: beside this binary)")
	f.DurationVar(&o.Demo.Quiet, "settle", o.Demo.Quiet, "how long a scenario must stay unchanged to count as settled")
	f.IntVar(&o.Demo.RealNodes, "real-nodes", -1, "real nodes in Lockstep's cluster, whose gangs run as real containers and print the devices each rank saw; "+
		"default: 2 when this machine can run them (root, runc, the CNI plugins and `make build`'s kubelet and containerd), else none")
	return cmd
}

// Complete finds the binaries (beside this one unless --bin-dir) and sets
// where the comparison is printed.
func (o *Options) Complete(out io.Writer) error {
	o.Demo.Out = out
	if o.Demo.BinDir == "" {
		dir, err := dev.BinDir()
		if err != nil {
			return err
		}
		o.Demo.BinDir = dir
	}
	if o.Demo.RealNodes < 0 {
		o.Demo.RealNodes = 2
		if err := devcluster.CanRunRealNodes(o.Demo.BinDir); err != nil {
			o.Demo.RealNodes = 0
			fmt.Fprintf(out, "no real containers this time (%v)\n", err)
		}
	}
	return nil
}

// Validate checks the flags before a cluster is started.
func (o *Options) Validate() error {
	switch d := o.Demo; {
	case d.StateDir == "":
		return fmt.Errorf("--state-dir is empty: name a directory for the demo's clusters (default .lockstep/demo)")
	case d.BasePort < 1024 || d.BasePort > 65535-demo.PortCount:
		return fmt.Errorf("--base-port %d: want 1024-%d (the demo's three clusters use %d ports from it)", d.BasePort, 65535-demo.PortCount, demo.PortCount)
	case d.Quiet <= 0:
		return fmt.Errorf("--settle %s: want a positive duration, e.g. 6s (a scenario settles once unchanged that long)", d.Quiet)
	}
	return nil
}

// Run runs the scenarios under each scheduler and prints the comparison.
func (o *Options) Run(ctx context.Context) error {
	_, err := demo.Run(ctx, o.Demo)
	return err
}
