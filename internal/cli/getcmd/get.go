package explaincmd

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

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
	// Wide columns.
	Disruption    string `json:"disruptionMode"`
	PriorityClass string `json:"priorityClassName,omitempty"`
	Topology      string `json:"topology,omitempty"`
	StateMessage  string `json:"stateMessage,omitempty"`
}

// NewGetCommand returns `lockstep get podgroups` (`kubectl lockstep get`).
func NewGetCommand() *cobra.Command {
	f := newFlags("json", "yaml", "wide", "name")
	var all bool
	cmd := &cobra.Command{
		Use:   "get podgroups [NAME] | podgroup/NAME [-n NAMESPACE | -A] [-o json|yaml|wide|name]",
		Short: "List PodGroups like kubectl get, with members bound, the state now and time to scheduled",
		Example: `  lockstep get podgroups -n ml-team
  kubectl lockstep get podgroup/train -n ml-team -o wide`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			kind, name, err := typeName(args, false)
			if err != nil {
				return err
			}
			if kind != "podgroups" && kind != "podgroup" && kind != "pg" && kind != "podgroups.scheduling.lockstep.dev" {
				return fmt.Errorf("cannot get %q: only podgroups", kind)
			}
			client, dyn, ns, err := f.clients()
			if err != nil {
				return err
			}
			if all {
				ns = ""
			}
			rows, err := listRows(cmd.Context(), client, dyn, ns, name)
			if err != nil {
				return err
			}
			return printRows(cmd.OutOrStdout(), f.output, all, rows)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list across all namespaces")
	return cmd
}

// listRows reads the PodGroups (one when name is set) and their members.
func listRows(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, ns, name string) ([]Row, error) {
	var items []unstructured.Unstructured
	if name != "" {
		u, err := dyn.Resource(podgroup.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		items = []unstructured.Unstructured{*u}
	} else {
		list, err := dyn.Resource(podgroup.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		items = list.Items
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel})
	if err != nil {
		return nil, err
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
	for i := range items {
		pg, err := podgroup.FromUnstructured(&items[i])
		if err != nil {
			return nil, err
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
	return rows, nil
}

// printRows prints rows as kubectl get would in the given format.
func printRows(out io.Writer, format string, all bool, rows []Row) error {
	switch format {
	case "json", "yaml":
		return printStructured(out, format, rows)
	case "name":
		for _, r := range rows {
			fmt.Fprintf(out, "podgroup.scheduling.lockstep.dev/%s\n", r.Name)
		}
		return nil
	}
	wide := format == "wide"
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	if all {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprint(tw, "NAME\tPOLICY\tMINCOUNT\tBOUND/MEMBERS\tSCHEDULED\tREASON\tSTATE\tINCARNATION\tAGE\tTIME-TO-SCHEDULED")
	if wide {
		fmt.Fprint(tw, "\tDISRUPTION\tPRIORITY-CLASS\tTOPOLOGY\tMESSAGE")
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		if all {
			fmt.Fprintf(tw, "%s\t", r.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\t%d\t%s\t%s", r.Name, r.Policy, r.MinCount, r.Bound, r.Members, r.Status, r.Reason, r.State, r.Incarnation, r.Age, r.TimeToScheduled)
		if wide {
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s", r.Disruption, orDash(r.PriorityClass), orDash(r.Topology), r.StateMessage)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func row(pg *lockv1.PodGroup, members, bound int) Row {
	r := Row{Namespace: pg.Namespace, Name: pg.Name, Policy: "basic", Members: members, Bound: bound, Status: "Unknown", Reason: "-", TimeToScheduled: "-",
		Age: duration.HumanDuration(time.Since(pg.CreationTimestamp.Time))}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		r.Policy, r.MinCount = "gang", g.MinCount
	}
	r.State = "-"
	if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.Running); c != nil {
		r.State, r.StateMessage = c.Reason, c.Message
	}
	r.Disruption = "single"
	if podgroup.DisruptAll(pg) {
		r.Disruption = "all"
	}
	r.PriorityClass = pg.Spec.PriorityClassName
	r.Topology = strings.Join(podgroup.TopologyKeys(pg), ",")
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
