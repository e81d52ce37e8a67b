// Package cli wires the lockstep subcommands together: the lockstep binary
// has them all, the kubectl plugin the user commands (audit, explain, get,
// preflight, version). Each subcommand but version lives in its own package
// with Options → Complete / Validate / Run, and reaches a cluster through
// clientopts.
package cli

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/cli/auditcmd"
	"github.com/lockstep-dev/lockstep/internal/cli/controllerscmd"
	"github.com/lockstep-dev/lockstep/internal/cli/democmd"
	"github.com/lockstep-dev/lockstep/internal/cli/dev"
	"github.com/lockstep-dev/lockstep/internal/cli/explaincmd"
	"github.com/lockstep-dev/lockstep/internal/cli/getcmd"
	"github.com/lockstep-dev/lockstep/internal/cli/preflightcmd"
	"github.com/lockstep-dev/lockstep/internal/cli/schedulercmd"
	"github.com/lockstep-dev/lockstep/internal/cli/simulatecmd"
	"github.com/lockstep-dev/lockstep/internal/cli/webhookcmd"
	"github.com/lockstep-dev/lockstep/internal/version"
)

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string) int { return run(ctx, lockstepRoot(), args) }

// ExecutePlugin runs `kubectl lockstep`: the user commands only.
func ExecutePlugin(ctx context.Context, args []string) int { return run(ctx, pluginRoot(), args) }

func lockstepRoot() *cobra.Command {
	root := newRoot("lockstep", "Gang-aware, DRA-native batch scheduler for Kubernetes")
	root.AddCommand(dev.NewCommand(), schedulercmd.NewCommand(), controllerscmd.NewCommand(), webhookcmd.NewCommand(), preflightcmd.NewCommand(), explaincmd.NewCommand(), getcmd.NewCommand(), auditcmd.NewCommand(), democmd.NewCommand(), simulatecmd.NewCommand(), versionCommand())
	return root
}

func pluginRoot() *cobra.Command {
	root := newRoot("kubectl-lockstep", "Lockstep for kubectl: why a gang is pending, PodGroups and their state, a cluster preflight, an audit of partial starts")
	// Help and examples say `kubectl lockstep`, as the user types it.
	root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl lockstep"}
	root.AddCommand(explaincmd.NewCommand(), getcmd.NewCommand(), preflightcmd.NewCommand(), auditcmd.NewCommand(), versionCommand())
	return root
}

func newRoot(use, short string) *cobra.Command {
	root := &cobra.Command{Use: use, Short: short, SilenceUsage: true, SilenceErrors: true}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	root.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))
	return root
}

func run(ctx context.Context, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	logger := klog.Background()
	if err := root.ExecuteContext(klog.NewContext(ctx, logger)); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the Lockstep version and the Kubernetes line it targets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "lockstep %s (Kubernetes libraries %s)\n", version.Lockstep, version.KubernetesLibraries)
			return nil
		},
	}
}
