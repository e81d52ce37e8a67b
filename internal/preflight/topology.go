package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
)

// Well-known topology keys: the zone, and the network node layers Amazon
// EKS labels nodes with from EC2 instance topology (layer 1 the widest,
// all within one Availability Zone).
const (
	labelNetworkLayer1 = "topology.k8s.aws/network-node-layer-1"
	labelNetworkLayer2 = "topology.k8s.aws/network-node-layer-2"
	labelNetworkLayer3 = "topology.k8s.aws/network-node-layer-3"
)

// wellKnownNesting is the chain the well-known keys nest in, narrowest
// first.
var wellKnownNesting = []string{labelNetworkLayer3, labelNetworkLayer2, labelNetworkLayer1, corev1.LabelTopologyZone}

// examples is how many node or domain names a finding quotes.
const examples = 3

// TopologyKey is what the nodes say of one topology key.
type TopologyKey struct {
	Key string `json:"key"`
	// UsedBy counts the PodGroups whose required or preferred levels name it.
	UsedBy int `json:"usedBy"`
	// Domains are its values on the nodes; NodesMissing the nodes without it.
	Domains      int `json:"domains"`
	NodesMissing int `json:"nodesMissing"`
	// OneNodeDomains are the domains of a single node.
	OneNodeDomains int `json:"oneNodeDomains"`
	// NotNested says, for each key it should nest in and does not, which
	// value spans several of that key's values.
	NotNested []string `json:"notNested,omitempty"`
	// MissingExamples and OneNodeExamples name a few nodes and domains.
	MissingExamples []string `json:"missingExamples,omitempty"`
	OneNodeExamples []string `json:"oneNodeExamples,omitempty"`
}

// checkTopology reports, for the well-known keys the nodes carry (the
// zone always) and every key PodGroups use, its domains, the nodes missing
// it, the keys it does not nest in (a group's preferred levels in each
// other and in its required ones; the well-known chain), and its one-node
// domains — one check line per key, and the details in r.Topology.
func (r *Report) checkTopology(ctx context.Context, dyn dynamic.Interface, nodes []corev1.Node) {
	in := snapshot.Input{}
	for i := range nodes {
		in.Nodes = append(in.Nodes, &nodes[i])
	}
	snap := snapshot.New(in)
	used, outers := groupLevels(ctx, dyn)
	for i := 0; i+1 < len(wellKnownNesting); i++ {
		outers[wellKnownNesting[i]] = appendNew(outers[wellKnownNesting[i]], wellKnownNesting[i+1])
	}
	for _, key := range topologyKeys(snap, used) {
		tk := describeKey(snap, key, used[key], outers[key])
		r.Topology = append(r.Topology, tk)
		status, detail, fix := judgeKey(tk, len(nodes))
		r.add("topology "+key, status, detail, fix)
	}
}

// groupLevels reads the PodGroups (Lockstep's and the in-tree ones, where
// readable): how many name each key, and for each key the keys it must
// nest in — a preferred level in the next wider one and in the required
// ones.
func groupLevels(ctx context.Context, dyn dynamic.Interface) (used map[string]int, outers map[string][]string) {
	used, outers = map[string]int{}, map[string][]string{}
	if dyn == nil {
		return used, outers
	}
	for _, gvr := range []schema.GroupVersionResource{podgroup.Resource, podgroup.UpstreamResource} {
		list, err := dyn.Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range list.Items {
			pg, err := podgroup.FromUnstructured(&list.Items[i])
			if err != nil {
				continue
			}
			required, preferred := podgroup.TopologyKeys(pg), podgroup.PreferredTopology(pg)
			for _, k := range appendNew(append([]string(nil), required...), preferred...) {
				used[k]++
			}
			for j, k := range preferred {
				if j+1 < len(preferred) {
					outers[k] = appendNew(outers[k], preferred[j+1])
				}
				outers[k] = appendNew(outers[k], required...)
			}
		}
	}
	return used, outers
}

// topologyKeys are the keys to report, sorted: those groups use, the zone,
// and the other well-known keys some node carries.
func topologyKeys(snap *snapshot.Snapshot, used map[string]int) []string {
	keys := map[string]bool{corev1.LabelTopologyZone: true}
	for k := range used {
		keys[k] = true
	}
	for _, k := range wellKnownNesting {
		if d, _ := topology.Domains(snap, k); len(d) > 0 {
			keys[k] = true
		}
	}
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// describeKey counts a key's domains, the nodes without it and its
// one-node domains, and checks it nests in outers.
func describeKey(snap *snapshot.Snapshot, key string, usedBy int, outers []string) TopologyKey {
	domains, missing := topology.Domains(snap, key)
	tk := TopologyKey{Key: key, UsedBy: usedBy, Domains: len(domains), NodesMissing: missing}
	for _, ni := range snap.Nodes {
		if _, ok := ni.Node.Labels[key]; !ok && len(tk.MissingExamples) < examples {
			tk.MissingExamples = append(tk.MissingExamples, ni.Node.Name)
		}
	}
	for _, d := range domains {
		if len(d.Nodes) == 1 {
			tk.OneNodeDomains++
			if len(tk.OneNodeExamples) < examples {
				tk.OneNodeExamples = append(tk.OneNodeExamples, fmt.Sprintf("%s (node %s)", d.Labels[0].Value, d.Nodes[0].Node.Name))
			}
		}
	}
	for _, outer := range outers {
		if e := topology.Nests(snap, key, outer); e != nil {
			tk.NotNested = append(tk.NotNested, e.Error())
		}
	}
	return tk
}

// judgeKey words a key's check line: its worst finding's status, every
// finding, and the fixes.
func judgeKey(tk TopologyKey, nodes int) (Status, string, string) {
	if tk.Domains == 0 {
		if tk.UsedBy == 0 {
			return Info, "no node carries it", ""
		}
		return Warn, fmt.Sprintf("no node carries it, and %d PodGroup(s) name it: a group requiring it never fits; one preferring it falls back to its wider levels", tk.UsedBy),
			fmt.Sprintf("label the nodes %s=<domain>, or change the groups' topology", tk.Key)
	}
	status := OK
	details := []string{fmt.Sprintf("%d domain(s) over %d of %d nodes", tk.Domains, nodes-tk.NodesMissing, nodes)}
	var fixes []string
	if tk.UsedBy > 0 {
		details[0] += fmt.Sprintf(", used by %d PodGroup(s)", tk.UsedBy)
	}
	if tk.NodesMissing > 0 {
		details = append(details, fmt.Sprintf("%d node(s) lack it (%s): a group using it never runs there", tk.NodesMissing, strings.Join(tk.MissingExamples, ", ")))
		fixes = append(fixes, fmt.Sprintf("label every node %s=<domain>", tk.Key))
		status = worse(status, Info)
		if tk.UsedBy > 0 {
			status = Warn
		}
	}
	for _, n := range tk.NotNested {
		details = append(details, n)
		status = Warn
	}
	if len(tk.NotNested) > 0 {
		fixes = append(fixes, "relabel the nodes so each of its domains lies within one domain of the wider key; until then a group falling back is placed in the part of the domain inside its wider one")
	}
	if tk.OneNodeDomains > 0 {
		details = append(details, fmt.Sprintf("%d one-node domain(s) (%s): a gang kept in one of them must fit on one node", tk.OneNodeDomains, strings.Join(tk.OneNodeExamples, ", ")))
		status = worse(status, Info)
	}
	return status, strings.Join(details, "; "), strings.Join(fixes, "; ")
}

// worse is the more severe of two statuses.
func worse(a, b Status) Status {
	rank := map[Status]int{OK: 0, Info: 1, Warn: 2, Fail: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		found := false
		for _, l := range list {
			found = found || l == it
		}
		if !found {
			list = append(list, it)
		}
	}
	return list
}
