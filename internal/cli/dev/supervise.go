package dev

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// newSuperviseCommand returns `lockstep dev supervise`, which `dev up
// --detach` starts to restart the cluster's components that exit (a
// foreground `dev up` does it itself). Hidden: users never run it.
func newSuperviseCommand() *cobra.Command {
	stateDir := DefaultStateDir
	cmd := &cobra.Command{
		Use:    "supervise",
		Short:  "Start again the components of a detached local cluster that exit, until `lockstep dev down`",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := filepath.Abs(stateDir)
			if err != nil {
				return err
			}
			return devcluster.Supervise(cmd.Context(), dir, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", stateDir, "state directory of the cluster to supervise")
	return cmd
}
