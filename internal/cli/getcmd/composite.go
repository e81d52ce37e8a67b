package getcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/output"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// compositeTypes are the names `get` takes for Lockstep's
// CompositePodGroup.
var compositeTypes = []string{"compositepodgroups", "compositepodgroup", "cpg", "compositepodgroups.scheduling.lockstep.dev", "compositepodgroup.scheduling.lockstep.dev"}

// CompositeRow is one line of `lockstep get compositepodgroups`.
type CompositeRow struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	Parent        string `json:"parent,omitempty"`
	Policy        string `json:"policy"`
	MinGroupCount int32  `json:"minGroupCount"`
	// Children counts the PodGroups and CompositePodGroups that name this
	// one as their parent.
	Children        int    `json:"children"`
	Status          string `json:"status"`
	Reason          string `json:"reason"`
	Age             string `json:"age"`
	TimeToScheduled string `json:"timeToScheduled"`
	// Wide columns.
	Disruption    string `json:"disruptionMode"`
	PriorityClass string `json:"priorityClassName,omitempty"`
	Topology      string `json:"topology,omitempty"`
	Message       string `json:"message,omitempty"`
}

// listCompositeRows reads the CompositePodGroups of namespace ns ("" for
// all; only names when given) and counts each one's children. Groups found
// are returned beside the error naming those that were not.
func listCompositeRows(ctx context.Context, c *clientopts.Clients, ns string, names []string, now time.Time) ([]CompositeRow, error) {
	api := c.Lockstep.SchedulingV1beta1()
	all, err := api.CompositePodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing CompositePodGroups: %w", served(err))
	}
	groups, err := api.PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PodGroups: %w", served(err))
	}
	children := map[string]int{}
	for i := range all.Items {
		if p := podgroup.CompositeParent(&all.Items[i]); p != "" {
			children[all.Items[i].Namespace+"/"+p]++
		}
	}
	for i := range groups.Items {
		if p := podgroup.ParentOf(&groups.Items[i]); p != "" {
			children[groups.Items[i].Namespace+"/"+p]++
		}
	}
	byName := map[string]*lockv1.CompositePodGroup{}
	for i := range all.Items {
		byName[all.Items[i].Name] = &all.Items[i]
	}
	var rows []CompositeRow
	var errs []error
	if len(names) == 0 {
		for i := range all.Items {
			rows = append(rows, compositeRow(&all.Items[i], children, now))
		}
	}
	for _, n := range names {
		if c, ok := byName[n]; ok {
			rows = append(rows, compositeRow(c, children, now))
			continue
		}
		errs = append(errs, fmt.Errorf("CompositePodGroup %s/%s not found: `lockstep get compositepodgroups -n %s` lists those there are", ns, n, ns))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
	return rows, errors.Join(errs...)
}

func compositeRow(c *lockv1.CompositePodGroup, children map[string]int, now time.Time) CompositeRow {
	gang, minGroups := podgroup.CompositeGang(c)
	r := CompositeRow{Namespace: c.Namespace, Name: c.Name, Parent: podgroup.CompositeParent(c), Policy: "basic",
		Children: children[c.Namespace+"/"+c.Name], Status: "Unknown", Reason: "-", TimeToScheduled: "-", Disruption: "single",
		PriorityClass: c.Spec.PriorityClassName, Age: duration.HumanDuration(now.Sub(c.CreationTimestamp.Time))}
	if gang {
		r.Policy, r.MinGroupCount = "gang", int32(minGroups)
	}
	if podgroup.CompositeDisruptAll(c) {
		r.Disruption = "all"
	}
	if sc := c.Spec.SchedulingConstraints; sc != nil {
		var keys []string
		for _, t := range sc.Topology {
			keys = append(keys, t.Key)
		}
		r.Topology = strings.Join(keys, ",")
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled); cond != nil {
		r.Status, r.Reason, r.Message = string(cond.Status), cond.Reason, cond.Message
		if cond.Status == metav1.ConditionTrue {
			r.TimeToScheduled = cond.LastTransitionTime.Sub(c.CreationTimestamp.Time).Round(time.Second).String()
		}
	}
	return r
}

// printCompositeRows prints rows as kubectl get would in the flag's
// format; all adds the NAMESPACE column.
func printCompositeRows(out io.Writer, o *output.Flag, all bool, rows []CompositeRow) error {
	switch {
	case o.Structured():
		if rows == nil {
			rows = []CompositeRow{}
		}
		return o.Print(out, rows)
	case o.Format == "name":
		for _, r := range rows {
			fmt.Fprintf(out, "compositepodgroup.scheduling.lockstep.dev/%s\n", r.Name)
		}
		return nil
	}
	wide := o.Format == "wide"
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	if all {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprint(tw, "NAME\tPARENT\tPOLICY\tMINGROUPCOUNT\tCHILDREN\tSCHEDULED\tREASON\tAGE\tTIME-TO-SCHEDULED")
	if wide {
		fmt.Fprint(tw, "\tDISRUPTION\tPRIORITY-CLASS\tTOPOLOGY\tMESSAGE")
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		if all {
			fmt.Fprintf(tw, "%s\t", r.Namespace)
		}
		minGroups := "-"
		if r.Policy == "gang" {
			minGroups = fmt.Sprint(r.MinGroupCount)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s", r.Name, orDash(r.Parent), r.Policy, minGroups, r.Children, r.Status, r.Reason, r.Age, r.TimeToScheduled)
		if wide {
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s", r.Disruption, orDash(r.PriorityClass), orDash(r.Topology), r.Message)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// runComposites is Run for CompositePodGroups.
func (o *Options) runComposites(ctx context.Context, out, errOut io.Writer) error {
	rows, err := listCompositeRows(ctx, o.Clients, o.Client.Namespace, o.Names, o.Now())
	switch {
	case len(rows) == 0 && err != nil:
		return err
	case len(rows) == 0 && (o.Output.Format == "" || o.Output.Format == "wide"):
		if o.Client.AllNamespaces {
			fmt.Fprintln(errOut, "No CompositePodGroups found.")
		} else {
			fmt.Fprintf(errOut, "No CompositePodGroups found in namespace %s.\n", o.Client.Namespace)
		}
		return nil
	}
	if perr := printCompositeRows(out, o.Output, o.Client.AllNamespaces, rows); perr != nil {
		return perr
	}
	return err
}
