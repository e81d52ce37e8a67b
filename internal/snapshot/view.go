package snapshot

import (
	"sort"

	resourcev1 "k8s.io/api/resource/v1"
)

// View is the cache as it stands, as a snapshot of its own: built afresh
// under the cache's lock, sharing nothing the scheduling loop changes (not
// the loop's Snapshot, not what changed since its last Update), for
// readers beside the loop — the metrics computed at scrape time. It holds
// the claims as cycles see them (assumed versions included; an assumption
// whose ttl passed counts until the loop's next Update drops it) and no
// nominations. It costs one pass over the nodes and claims.
func (c *Cache) View() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := New(Input{Features: c.features})
	for key, ci := range c.claims {
		if cl := ci.effective(); cl != nil {
			s.Claims[key] = cl
			s.HoldClaim(cl)
		}
	}
	names := make([]string, 0, len(c.nodes))
	for name, it := range c.nodes {
		if it.node != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	s.Nodes = make([]*NodeInfo, len(names))
	for i, name := range names {
		// nodeInfo counts each node's devices s.Allocated holds.
		ni := c.nodeInfo(s, c.nodes[name])
		s.Nodes[i], s.nodeByName[name] = ni, ni
	}
	s.GlobalSlices = sortedSlices(c.global)
	s.Classes = make(map[string]*resourcev1.DeviceClass, len(c.classes))
	for n, cl := range c.classes {
		s.Classes[n] = cl
	}
	return s
}
