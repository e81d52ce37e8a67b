package provision

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// FitsWith is the cycle's decision (st) of the unit named self with planned nodes
// added: whether it would bind, on the cycle's own view (nominations
// held), without preempting. The planned nodes exist only for the
// decision.
func FitsWith(ctx context.Context, st *cycle.State, self string, tu *podgroup.TreeUnit, prio int32) Fits {
	return func(nodes []*corev1.Node, slices []*resourcev1.ResourceSlice) (bool, string) {
		for _, n := range nodes {
			st.Cache.AddNode(n)
		}
		for _, sl := range slices {
			st.Cache.AddSlice(sl)
		}
		defer func() {
			for _, sl := range slices {
				st.Cache.DeleteSlice(sl)
			}
			for _, n := range nodes {
				st.Cache.DeleteNode(n)
			}
		}()
		d := decide.Decide(ctx, st.Snapshot(ctx, self, prio), st.CEL, decide.Input{Unit: tu, Priority: prio, DryRun: true})
		if d.Kind == decide.Bind {
			return true, ""
		}
		why := d.Summary
		if d.Reason != "" {
			why += ": " + d.Reason
		}
		return false, why
	}
}

// shortfallBudget bounds the time a shortfall plans (on the scheduling
// loop): a group not found to help within it is left out.
const shortfallBudget = time.Second

// maxNodeGroups bounds the groups a shortfall plans over (each costs a
// few decisions): the largest that could take one of the unit's pods.
const maxNodeGroups = 4

// NodeShortfall says how many more nodes of which node group would make a
// unit that does not fit fit ("" when none would, within one node per
// pending member), for clusters whose nodes no autoscaler Lockstep drives
// adds: a group of the nodes that exist (skip leaves some out) is planned
// as more nodes like its first, with its devices.
func NodeShortfall(ctx context.Context, st *cycle.State, self string, tu *podgroup.TreeUnit, prio int32, skip func(*corev1.Node) bool) string {
	logger := klog.FromContext(ctx)
	var pods []*corev1.Pod
	for _, u := range tu.Root.Leaves() {
		pods = append(pods, u.Pending...)
	}
	if len(pods) == 0 {
		return ""
	}
	snap := st.Cache.Update()
	nodes := make([]*corev1.Node, 0, len(snap.Nodes))
	slices := make(map[string][]*resourcev1.ResourceSlice, len(snap.Nodes))
	for _, ni := range snap.Nodes {
		nodes = append(nodes, ni.Node)
		slices[ni.Node.Name] = ni.Slices
	}
	var groups []NodeGroup
	for _, g := range NodeGroups(nodes, func(n string) []*resourcev1.ResourceSlice { return slices[n] }, skip) {
		for _, p := range pods {
			if g.Admits(logger, p) {
				groups = append(groups, g)
				break
			}
		}
		if len(groups) == maxNodeGroups {
			break
		}
	}
	// A flat unit's requests bound the nodes it needs from below: the
	// search starts there.
	var from func(NodeGroup) (int, bool)
	if f := tu.Flat(); f != nil {
		if d, ok := placement.DemandOf(snap, f); ok {
			total := placement.TotalAllocatable(snap)
			from = func(g NodeGroup) (int, bool) {
				return d.MoreNodes(total, snapshot.FromList(g.Template.Status.Allocatable))
			}
		}
	}
	fits, start := FitsWith(ctx, st, self, tu, prio), st.Clock.Now()
	needs := Shortfall(groups, len(pods), from, func(nodes []*corev1.Node, slices []*resourcev1.ResourceSlice) (bool, string) {
		if st.Clock.Since(start) > shortfallBudget {
			return false, "out of time"
		}
		return fits(nodes, slices)
	})
	if len(needs) == 0 {
		return ""
	}
	var says []string
	for i, n := range needs {
		if i == 3 {
			break
		}
		says = append(says, n.String())
	}
	return "more nodes would make it fit: " + strings.Join(says, ", or ")
}
