package explaincmd

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Row is one line of `lockstep get podgroups`.
type Row struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Policy    string `json:"policy"`
	MinCount  int32  `json:"minCount"`
	Bound     int    `json:"bound"`
	Members   int    `json:"members"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	// State is the Running condition's reason: what the group does now.
	State           string `json:"state"`
	Incarnation     int32  `json:"incarnation"`
	Age             string `json:"age"`
	TimeToScheduled string `json:"timeToScheduled"`
}

// NewGetCommand returns `lockstep get podgroups`.
func NewGetCommand() *cobra.Command {
	f := &flags{}
	var all bool
	cmd := &cobra.Command{
		Use:   "get podgroups [-n NAMESPACE | -A]",
		Short: "List PodGroups like kubectl get, with members bound and time to scheduled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "podgroups" && args[0] != "podgroup" && args[0] != "pg" {
				return fmt.Errorf("cannot get %q: only podgroups", args[0])
			}
			client, dyn, ns, err := f.clients()
			if err != nil {
				return err
			}
			if all {
				ns = ""
			}
			list, err := dyn.Resource(podgroup.Resource).Namespace(ns).List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			pods, err := client.CoreV1().Pods(ns).List(cmd.Context(), metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel})
			if err != nil {
				return err
			}
			members, bound := map[string]int{}, map[string]int{}
			for _, p := range pods.Items {
				k := p.Namespace + "/" + podgroup.GroupOf(&p)
				if podgroup.Active(&p) && !podgroup.Going(&p) {
					members[k]++
					bound[k]++
				} else if podgroup.Pending(&p) {
					members[k]++
				}
			}
			var rows []Row
			for _, u := range list.Items {
				pg := &lockv1.PodGroup{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pg); err != nil {
					return err
				}
				k := pg.Namespace + "/" + pg.Name
				rows = append(rows, row(pg, members[k], bound[k]))
			}
			sort.Slice(rows, func(i, j int) bool {
				if rows[i].Namespace != rows[j].Namespace {
					return rows[i].Namespace < rows[j].Namespace
				}
				return rows[i].Name < rows[j].Name
			})
			out := cmd.OutOrStdout()
			if f.output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
			if all {
				fmt.Fprint(tw, "NAMESPACE\t")
			}
			fmt.Fprintln(tw, "NAME\tPOLICY\tMINCOUNT\tBOUND/MEMBERS\tSCHEDULED\tREASON\tSTATE\tINCARNATION\tAGE\tTIME-TO-SCHEDULED")
			for _, r := range rows {
				if all {
					fmt.Fprintf(tw, "%s\t", r.Namespace)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Name, r.Policy, r.MinCount, r.Bound, r.Members, r.Status, r.Reason, r.State, r.Incarnation, r.Age, r.TimeToScheduled)
			}
			return tw.Flush()
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list across all namespaces")
	return cmd
}

func row(pg *lockv1.PodGroup, members, bound int) Row {
	r := Row{Namespace: pg.Namespace, Name: pg.Name, Policy: "basic", Members: members, Bound: bound, Status: "Unknown", Reason: "-", TimeToScheduled: "-",
		Age: duration.HumanDuration(time.Since(pg.CreationTimestamp.Time))}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		r.Policy, r.MinCount = "gang", g.MinCount
	}
	r.State = "-"
	if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.Running); c != nil {
		r.State = c.Reason
	}
	if inc := pg.Status.Incarnation; inc != nil {
		r.Incarnation = inc.Number
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled); c != nil {
		r.Status, r.Reason = string(c.Status), c.Reason
		if c.Status == metav1.ConditionTrue {
			r.TimeToScheduled = c.LastTransitionTime.Sub(pg.CreationTimestamp.Time).Round(time.Second).String()
		}
	}
	return r
}
