package decide

import (
	"slices"

	"github.com/lockstep-dev/lockstep/internal/placement"
)

// Domains are the topology domains the decision placed its leaves in
// ("zone=z1, rack=r3"), each once; nil without topology.
func (d Decision) Domains() []string {
	var doms []string
	for _, n := range d.Leaves() {
		if dom := d.Tree.Leaves[n].Domain; dom != "" && !slices.Contains(doms, dom) {
			doms = append(doms, dom)
		}
	}
	return doms
}

// TopologyKeys are the node label keys the decision's groups and
// composites constrain, required and preferred, each once: the keys that
// say where a placement is (Kueue's admission check pins them).
func (d Decision) TopologyKeys() []string {
	var keys []string
	if d.Root == nil {
		return nil
	}
	d.Root.Walk(func(n *placement.TreeNode) {
		t := n.Topology
		if n.Leaf != nil {
			t = n.Leaf.Topology
		}
		for _, k := range append(append([]string(nil), t.Required...), t.Preferred...) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	})
	return keys
}
