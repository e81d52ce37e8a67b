package dev

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

func newDownCommand() *cobra.Command {
	stateDir := DefaultStateDir
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local control plane started by `lockstep dev up` and remove its state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := filepath.Abs(stateDir)
			if err != nil {
				return err
			}
			err = devcluster.Down(dir)
			if devcluster.IsNoCluster(err) {
				fmt.Fprintf(cmd.OutOrStdout(), "no local cluster in %s; nothing to stop\n", dir)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "local cluster in %s stopped; logs kept in %s\n", dir, filepath.Join(dir, "logs"))
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", stateDir, "state directory of the cluster to stop")
	return cmd
}
