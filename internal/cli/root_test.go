package cli

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// Every command refuses arguments it does not take, and the commands that
// reach a cluster take kubectl's --kubeconfig and --context: one set of
// connection flags for all.
func TestEveryCommand(t *testing.T) {
	connects := map[string]bool{"audit": true, "explain": true, "get": true, "preflight": true, "scheduler": true, "controllers": true, "webhook": true, "simulate": true, "gpu-driver": true}
	for _, root := range []*cobra.Command{lockstepRoot(), pluginRoot()} {
		var visit func(c *cobra.Command)
		visit = func(c *cobra.Command) {
			if c.Runnable() && c.Args == nil {
				t.Errorf("%s: no argument rule: arguments it does not use would be ignored", c.CommandPath())
			}
			for _, f := range []string{"kubeconfig", "context"} {
				if got := c.Flags().Lookup(f) != nil; got != connects[c.Name()] {
					t.Errorf("%s: has --%s: %v, want %v", c.CommandPath(), f, got, connects[c.Name()])
				}
			}
			for _, sub := range c.Commands() {
				visit(sub)
			}
		}
		visit(root)
	}
}

// The plugin carries the user commands only: nothing that runs or changes
// a cluster's scheduling.
func TestPluginCommands(t *testing.T) {
	var got []string
	for _, c := range pluginRoot().Commands() {
		got = append(got, c.Name())
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"audit", "explain", "get", "preflight", "version"}, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
