// Package preflightcmd implements `lockstep preflight`.
package preflightcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lockstep-dev/lockstep/internal/preflight"
)

// ErrFailed makes the command exit non-zero when a check failed.
var ErrFailed = errors.New("preflight found problems that would make gangs or DRA fail")

// NewCommand returns `lockstep preflight`.
func NewCommand() *cobra.Command {
	var kubeconfig, output string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check a cluster for gang scheduling and DRA: APIs, the silent Job field prune, Lockstep, drivers, oversubscription, EKS node supply",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
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
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				printTable(out, r)
			}
			if r.Failed() {
				return ErrFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
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
