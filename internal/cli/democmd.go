package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/cli/dev"
	"github.com/lockstep-dev/lockstep/internal/demo"
)

func demoCommand() *cobra.Command {
	o := demo.Options{StateDir: ".lockstep/demo", BasePort: 16553, Quiet: 6 * time.Second}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run seed 004's deadlock and preemption scenarios under kube-scheduler pod by pod, kube-scheduler's in-tree gang, and Lockstep, and compare",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.BinDir == "" {
				dir, err := dev.BinDir()
				if err != nil {
					return err
				}
				o.BinDir = dir
			}
			o.Out = cmd.OutOrStdout()
			_, err := demo.Run(cmd.Context(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.StateDir, "state-dir", o.StateDir, "where the demo's local clusters keep their state")
	f.IntVar(&o.BasePort, "base-port", o.BasePort, "API server port of the demo clusters (one at a time)")
	f.StringVar(&o.BinDir, "bin-dir", o.BinDir, "directory holding the Kubernetes binaries (default: beside this binary)")
	f.DurationVar(&o.Quiet, "settle", o.Quiet, "how long a scenario must stay unchanged to count as settled")
	return cmd
}
