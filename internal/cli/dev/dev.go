// Package dev implements `lockstep dev up|down`: the local control plane.
package dev

import (
	"github.com/spf13/cobra"
)

// DefaultStateDir is where `lockstep dev up` keeps the cluster, relative to
// the working directory.
const DefaultStateDir = ".lockstep/dev"

// NewCommand returns `lockstep dev`.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local Kubernetes 1.37 control plane with simulated GPU nodes",
	}
	cmd.AddCommand(newUpCommand(NewUpOptions()), newDownCommand(NewDownOptions()), newSuperviseCommand(NewSuperviseOptions()), newGPUDriverCommand())
	return cmd
}
