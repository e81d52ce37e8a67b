package getcmd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Row is one line of `lockstep get podgroups`.
type Row struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Policy    string `json:"policy"`
	MinCount  int32  `json:"minCount"`
	// Members, Bound, Pending and Gated are podgroup.Resolve's counts:
	// members that count toward minCount, of them those bound (or
	// finished, or being bound), those to place now, and those still gated.
	Members int    `json:"members"`
	Bound   int    `json:"bound"`
	Pending int    `json:"pending"`
	Gated   int    `json:"gated"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
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

// listRows reads the PodGroups of namespace ns ("" for all; only names
// when given) and the pods that may be their members, and resolves each
// group as the scheduler does. Groups that were found are returned beside
// the error naming those that were not.
func listRows(ctx context.Context, c *clientopts.Clients, ns string, names []string, now time.Time) ([]Row, error) {
	groups, missing, err := readGroups(ctx, c, ns, names)
	if err != nil {
		return nil, err
	}
	// Only Lockstep's pods can be members (podgroup.Ours); the field
	// selector leaves the rest on the server.
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.schedulerName", lockv1.SchedulerName).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of the PodGroups: %w", err)
	}
	ptrs := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		ptrs[i] = &pods.Items[i]
	}
	rows := make([]Row, 0, len(groups))
	for _, pg := range groups {
		rows = append(rows, row(podgroup.Resolve(pg, pg.Namespace, pg.Name, ptrs, nil), now))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
	return rows, missing
}

// readGroups gets the named groups, or lists those of ns. missing names
// the groups asked for that do not exist.
func readGroups(ctx context.Context, c *clientopts.Clients, ns string, names []string) (groups []*lockv1.PodGroup, missing, err error) {
	client := c.Lockstep.SchedulingV1beta1().PodGroups(ns)
	if len(names) == 0 {
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing PodGroups: %w", served(err))
		}
		for i := range list.Items {
			groups = append(groups, &list.Items[i])
		}
		return groups, nil, nil
	}
	var errs []error
	for _, n := range names {
		pg, err := client.Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && !unserved(err):
			errs = append(errs, fmt.Errorf("PodGroup %s/%s not found: `lockstep get podgroups -n %s` lists those there are", ns, n, ns))
		case err != nil:
			return nil, nil, fmt.Errorf("getting PodGroup %s/%s: %w", ns, n, served(err))
		default:
			groups = append(groups, pg)
		}
	}
	return groups, errors.Join(errs...), nil
}

// unserved reports whether err is the API server's 404 for a resource it
// does not serve (no object named): Lockstep's CRDs are not installed.
func unserved(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

// served adds the fix to an error that says PodGroups are not served.
func served(err error) error {
	if unserved(err) {
		return fmt.Errorf("%w: scheduling.lockstep.dev/v1beta1 is not served here; install Lockstep's CRDs (`lockstep preflight` checks the cluster)", err)
	}
	return err
}

func row(u *podgroup.Unit, now time.Time) Row {
	pg := u.Group
	r := Row{Namespace: pg.Namespace, Name: pg.Name, Policy: "basic", MinCount: int32(u.MinCount()),
		Members: len(u.Members), Bound: u.Bound, Pending: len(u.Pending), Gated: u.Gated,
		Status: "Unknown", Reason: "-", State: "-", TimeToScheduled: "-", Disruption: "single",
		Age: duration.HumanDuration(now.Sub(pg.CreationTimestamp.Time))}
	if u.Gang() {
		r.Policy = "gang"
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.Running); c != nil {
		r.State, r.StateMessage = c.Reason, c.Message
	}
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
