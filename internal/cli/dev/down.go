package dev

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// DownOptions are the flags of `lockstep dev down`.
type DownOptions struct {
	StateDir string
	// dir is StateDir made absolute (Complete).
	dir string
}

// NewDownOptions are the defaults: the cluster of `lockstep dev up`'s default state directory.
func NewDownOptions() *DownOptions { return &DownOptions{StateDir: DefaultStateDir} }

func newDownCommand(o *DownOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local control plane started by `lockstep dev up` and remove its state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.StateDir, "state-dir", o.StateDir, "state directory of the cluster to stop")
	return cmd
}

// Complete makes the state directory absolute.
func (o *DownOptions) Complete() error {
	dir, err := filepath.Abs(o.StateDir)
	o.dir = dir
	return err
}

// Validate refuses an empty --state-dir, which would name the working
// directory.
func (o *DownOptions) Validate() error {
	if o.StateDir == "" {
		return fmt.Errorf("--state-dir is empty: name the state directory of the cluster to stop (default %s)", DefaultStateDir)
	}
	return nil
}

// Run stops the cluster; no cluster in the directory is not an error.
func (o *DownOptions) Run(out io.Writer) error {
	err := devcluster.Down(o.dir)
	if devcluster.IsNoCluster(err) {
		fmt.Fprintf(out, "no local cluster in %s; nothing to stop\n", o.dir)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "local cluster in %s stopped; logs kept in %s\n", o.dir, filepath.Join(o.dir, "logs"))
	return nil
}
