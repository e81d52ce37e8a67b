package provision

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/clusterspec"
)

// groupLabels name the group a node was made by, as the platforms label
// their nodes, in the order they are looked for.
var groupLabels = []struct{ key, kind string }{
	{NodePoolLabel, "NodePool"},
	{"eks.amazonaws.com/nodegroup", "node group"},
	{"alpha.eksctl.io/nodegroup-name", "node group"},
	{"cloud.google.com/gke-nodepool", "node pool"},
	{"kubernetes.azure.com/agentpool", "agent pool"},
	{clusterspec.NodePoolLabel, "node pool"},
}

// NodeGroup is the nodes of one group (a node group, a static NodePool, a
// pool of the local cluster) of one instance type in one zone: more of
// them are what a gang that does not fit can be told to ask for when no
// autoscaler Lockstep drives makes them.
type NodeGroup struct {
	// Kind and Name name the group ("node group", "gpu-a"); Kind is empty
	// for nodes that name no group, known by their instance type alone.
	Kind, Name         string
	InstanceType, Zone string
	// Nodes is how many nodes the group has now.
	Nodes int
	// Template is the node new ones are planned like, Slices its
	// ResourceSlices (the devices a new node would bring).
	Template *corev1.Node
	Slices   []*resourcev1.ResourceSlice
}

// String is "node group gpu-a (p5.48xlarge in us-east-1a)".
func (g NodeGroup) String() string {
	var where []string
	if g.InstanceType != "" {
		where = append(where, g.InstanceType)
	}
	if g.Zone != "" {
		where = append(where, "in "+g.Zone)
	}
	if g.Kind == "" {
		return "nodes like " + g.Template.Name + " (" + strings.Join(where, " ") + ")"
	}
	if len(where) == 0 {
		return g.Kind + " " + g.Name
	}
	return fmt.Sprintf("%s %s (%s)", g.Kind, g.Name, strings.Join(where, " "))
}

// NodeGroups groups nodes by the group that made them, instance type and
// zone, largest group first, skipping those skip names (nodes an
// autoscaler Lockstep drives makes) and nodes that name neither a group
// nor an instance type. slices are a node's own ResourceSlices. A group's
// template is its first schedulable node by name.
func NodeGroups(nodes []*corev1.Node, slices func(node string) []*resourcev1.ResourceSlice, skip func(*corev1.Node) bool) []NodeGroup {
	byKey := map[string]*NodeGroup{}
	for _, n := range nodes {
		if skip != nil && skip(n) {
			continue
		}
		g := NodeGroup{InstanceType: n.Labels[corev1.LabelInstanceTypeStable], Zone: n.Labels[corev1.LabelTopologyZone]}
		for _, l := range groupLabels {
			if v := n.Labels[l.key]; v != "" {
				g.Kind, g.Name = l.kind, v
				break
			}
		}
		if g.Kind == "" && g.InstanceType == "" {
			continue
		}
		key := strings.Join([]string{g.Kind, g.Name, g.InstanceType, g.Zone}, "/")
		have := byKey[key]
		if have == nil {
			have = &g
			byKey[key] = have
		}
		have.Nodes++
		if n.Spec.Unschedulable {
			continue
		}
		if have.Template == nil || n.Name < have.Template.Name {
			have.Template = n
		}
	}
	out := make([]NodeGroup, 0, len(byKey))
	for _, g := range byKey {
		if g.Template == nil {
			continue // every node cordoned: no model of a new one
		}
		g.Slices = append([]*resourcev1.ResourceSlice(nil), slices(g.Template.Name)...)
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Nodes != out[j].Nodes {
			return out[i].Nodes > out[j].Nodes
		}
		return out[i].String() < out[j].String()
	})
	return out
}

// Admits reports whether one new node of the group could take the pod on
// its own — its required node affinity, its taints and its requests —
// the cheap test that keeps groups that cannot help out of planning.
func (g NodeGroup) Admits(logger klog.Logger, pod *corev1.Pod) bool {
	node := g.like(g.plannedPrefix(), 0)
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true); untolerated {
		return false
	}
	for name, q := range resource.PodRequests(pod, resource.PodResourcesOptions{}) {
		if have, ok := node.Status.Allocatable[name]; ok && have.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// plannedPrefix names the planned nodes of the group.
func (g NodeGroup) plannedPrefix() string {
	r := strings.NewReplacer(".", "-", "_", "-", "/", "-", " ", "-")
	return strings.ToLower(r.Replace(strings.Join([]string{PlannedPrefix, g.Kind, g.Name, g.InstanceType, g.Zone}, "-")))
}

// like is the i-th new node like the group's template: its labels (the
// hostname its own), capacity and taints, less the taints of the
// template's own state (not ready, cordoned, reserved, being deleted).
func (g NodeGroup) like(prefix string, i int) *corev1.Node {
	t := g.Template
	name := fmt.Sprintf("%s-%d", prefix, i)
	n := &corev1.Node{}
	n.Name = name
	n.Labels = make(map[string]string, len(t.Labels))
	for k, v := range t.Labels {
		n.Labels[k] = v
	}
	n.Labels[corev1.LabelHostname] = name
	for _, taint := range t.Spec.Taints {
		if strings.HasPrefix(taint.Key, "node.kubernetes.io/") || strings.HasPrefix(taint.Key, "node.cloudprovider.kubernetes.io/") ||
			taint.Key == v1beta1.ReservedForTaint || taint.Key == "karpenter.sh/disrupted" || taint.Key == "ToBeDeletedByClusterAutoscaler" {
			continue
		}
		n.Spec.Taints = append(n.Spec.Taints, taint)
	}
	n.Status.Capacity = t.Status.Capacity.DeepCopy()
	n.Status.Allocatable = t.Status.Allocatable.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Status.DeclaredFeatures = append([]string(nil), t.Status.DeclaredFeatures...)
	return n
}

// Like is count new nodes like the group's template, with its devices:
// each of the template's ResourceSlices, its pool renamed after the new
// node.
func (g NodeGroup) Like(count int) ([]*corev1.Node, []*resourcev1.ResourceSlice) {
	prefix := g.plannedPrefix()
	var nodes []*corev1.Node
	var slices []*resourcev1.ResourceSlice
	for i := range count {
		n := g.like(prefix, i)
		nodes = append(nodes, n)
		for _, sl := range g.Slices {
			c := sl.DeepCopy()
			c.Name = n.Name + "-" + sl.Name
			c.UID, c.ResourceVersion = "", ""
			c.Spec.NodeName = &n.Name
			if c.Spec.Pool.Name == g.Template.Name {
				c.Spec.Pool.Name = n.Name
			} else {
				c.Spec.Pool.Name += "-" + n.Name
			}
			slices = append(slices, c)
		}
	}
	return nodes, slices
}

// Need is how many more nodes of a group make a unit fit.
type Need struct {
	Group NodeGroup
	Count int
}

// String is "2 more nodes of node group gpu-a (p5.48xlarge in us-east-1a)".
func (n Need) String() string {
	return strings.Replace(Nodes(n.Count), " ", " more ", 1) + " of " + n.Group.String()
}

// Shortfall is, for each group, the fewest nodes more of it (at most
// maxNodes) with which the unit fits, fewest first; groups with which it
// does not fit within maxNodes are left out. from, when set, is a count
// of a group's nodes below which the unit cannot fit (false: no count
// of them can): the search starts there.
func Shortfall(groups []NodeGroup, maxNodes int, from func(NodeGroup) (int, bool), fits Fits) []Need {
	var out []Need
	for _, g := range groups {
		start := 1
		if from != nil {
			n, ok := from(g)
			if !ok {
				continue
			}
			start = n
		}
		n, _ := fewest(func(n int) ([]*corev1.Node, []*resourcev1.ResourceSlice, error) {
			nodes, slices := g.Like(n)
			return nodes, slices, nil
		}, start, maxNodes, fits)
		if n > 0 {
			out = append(out, Need{Group: g, Count: n})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count < out[j].Count })
	return out
}
