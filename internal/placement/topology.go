package placement

import (
	"sort"
	"strings"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// topologyDomains splits nodes by their values of keys (nodes missing a key
// are left out), ordered smallest domain first so a gang takes the tightest
// domain that fits it, then by domain name for determinism.
func topologyDomains(snap *snapshot.Snapshot, keys []string) [][]*snapshot.NodeInfo {
	byDomain := map[string][]*snapshot.NodeInfo{}
	for _, ni := range snap.Nodes {
		vals := make([]string, 0, len(keys))
		ok := true
		for _, k := range keys {
			v, has := ni.Node.Labels[k]
			if !has {
				ok = false
				break
			}
			vals = append(vals, v)
		}
		if ok {
			d := strings.Join(vals, "\x00")
			byDomain[d] = append(byDomain[d], ni)
		}
	}
	names := make([]string, 0, len(byDomain))
	for d := range byDomain {
		names = append(names, d)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := byDomain[names[i]], byDomain[names[j]]
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return names[i] < names[j]
	})
	out := make([][]*snapshot.NodeInfo, 0, len(names))
	for _, d := range names {
		out = append(out, byDomain[d])
	}
	return out
}

func failAll(unit Unit, d Diagnosis) Result {
	res := Result{}
	for _, m := range unit.Members {
		res.Unplaced = append(res.Unplaced, Failure{Pod: m.Pod, Diagnosis: d})
	}
	return res
}
