package dev

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// SuperviseOptions are the flags of `lockstep dev supervise`.
type SuperviseOptions struct {
	StateDir string
	// dir is StateDir made absolute (Complete).
	dir string
}

// NewSuperviseOptions are the defaults: the cluster of `lockstep dev up`'s
// default state directory.
func NewSuperviseOptions() *SuperviseOptions { return &SuperviseOptions{StateDir: DefaultStateDir} }

// newSuperviseCommand returns `lockstep dev supervise`, which `dev up
// --detach` starts to restart the cluster's components that exit (a
// foreground `dev up` does it itself). Hidden: users never run it.
func newSuperviseCommand(o *SuperviseOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "supervise",
		Short:  "Start again the components of a detached local cluster that exit, until `lockstep dev down`",
		Hidden: true,
		Args:   cobra.NoArgs,
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
	cmd.Flags().StringVar(&o.StateDir, "state-dir", o.StateDir, "state directory of the cluster to supervise")
	return cmd
}

// Complete makes the state directory absolute.
func (o *SuperviseOptions) Complete() error {
	dir, err := filepath.Abs(o.StateDir)
	o.dir = dir
	return err
}

// Validate refuses an empty --state-dir.
func (o *SuperviseOptions) Validate() error {
	if o.StateDir == "" {
		return fmt.Errorf("--state-dir is empty: name the state directory of the cluster to supervise (default %s)", DefaultStateDir)
	}
	return nil
}

// Run restarts the cluster's components that exit until ctx ends or the
// cluster is taken down.
func (o *SuperviseOptions) Run(ctx context.Context, out io.Writer) error {
	return devcluster.Supervise(ctx, o.dir, out)
}
