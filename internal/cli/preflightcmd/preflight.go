// Package preflightcmd implements `lockstep preflight`.
package preflightcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-dev/lockstep/internal/preflight"
)

// ErrFailed makes the command exit non-zero when a check failed.
var ErrFailed = errors.New("preflight found problems that would make gangs or DRA fail")

// NewCommand returns `lockstep preflight` (`kubectl lockstep preflight`).
func NewCommand() *cobra.Command {
	config := genericclioptions.NewConfigFlags(true)
	var output string
	cmd := &cobra.Command{
		Use:   "preflight [-o table|json|yaml]",
		Short: "Check a cluster for gang scheduling and DRA: APIs, the silent Job field prune, Lockstep, drivers, oversubscription, EKS node supply",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" && output != "yaml" {
				return fmt.Errorf("-o %q: want table, json or yaml", output)
			}
			cfg, err := config.ToRESTConfig()
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			r, err := preflight.Run(cmd.Context(), client, dyn)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			case "yaml":
				b, err := yaml.Marshal(r)
				if err != nil {
					return err
				}
				if _, err := out.Write(b); err != nil {
					return err
				}
			default:
				printTable(out, r)
			}
			if r.Failed() {
				return ErrFailed
			}
			return nil
		},
	}
	config.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	return cmd
}

func printTable(out io.Writer, r *preflight.Report) {
	fmt.Fprintf(out, "Kubernetes %s\n\n", r.KubernetesVersion)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL\tFIX")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Status, c.Detail, c.Fix)
	}
	_ = tw.Flush()
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
