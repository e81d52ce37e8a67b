package snapshot

import (
	"maps"
	"sort"

	resourcev1 "k8s.io/api/resource/v1"
)

// View is the cache as it stands, as a snapshot of its own, sharing
// nothing the scheduling loop changes (not the loop's Snapshot, not what
// changed since its last Update), for readers beside the loop — the
// metrics computed at scrape time. It holds the claims as cycles see them
// (assumed versions included; an assumption whose ttl passed counts until
// the loop's next Update drops it) and no nominations. The cache's lock is
// held only to copy what its entries point to; the snapshot is built after.
func (c *Cache) View() *Snapshot {
	c.mu.Lock()
	claims := make([]*resourcev1.ResourceClaim, 0, len(c.claims))
	for _, ci := range c.claims {
		if cl := ci.effective(); cl != nil {
			claims = append(claims, cl)
		}
	}
	items := make([]*nodeItem, 0, len(c.nodes))
	for _, it := range c.nodes {
		if it.node != nil {
			// What the cache changes in place is copied.
			items = append(items, &nodeItem{node: it.node, allocatable: it.allocatable.Clone(), requested: it.requested.Clone(),
				ports: maps.Clone(it.ports), slices: maps.Clone(it.slices)})
		}
	}
	global, classes, features := maps.Clone(c.global), maps.Clone(c.classes), c.features
	c.mu.Unlock()

	s := New(Input{Features: features})
	for _, cl := range claims {
		s.Claims[claimKey(cl)] = cl
		s.HoldClaim(cl)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].node.Name < items[j].node.Name })
	s.Nodes = make([]*NodeInfo, len(items))
	for i, it := range items {
		// nodeInfo counts each node's devices s.Allocated holds.
		ni := c.nodeInfo(s, it)
		s.Nodes[i], s.nodeByName[it.node.Name] = ni, ni
	}
	s.GlobalSlices = sortedSlices(global)
	s.Classes = classes
	if s.Classes == nil {
		s.Classes = map[string]*resourcev1.DeviceClass{}
	}
	return s
}
