package topology

import (
	"fmt"
	"sort"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Domains splits the nodes by their value of key (a node label), smallest
// first; nodes without it are counted in missing.
func Domains(snap *snapshot.Snapshot, key string) (domains []Domain, missing int) {
	byValue := map[string]*Domain{}
	var values []string
	for _, ni := range snap.Nodes {
		v, ok := ni.Node.Labels[key]
		if !ok {
			missing++
			continue
		}
		d := byValue[v]
		if d == nil {
			d = &Domain{Level: key, Labels: []Label{{key, v}}}
			byValue[v] = d
			values = append(values, v)
		}
		d.Nodes = append(d.Nodes, ni)
	}
	for _, v := range values {
		domains = append(domains, *byValue[v])
	}
	sortDomains(domains)
	return domains, missing
}

// NestError says that inner does not nest in outer: a value of inner is
// found under several values of outer.
type NestError struct {
	Inner, Outer string
	Value        string
	Outers       []string
}

func (e NestError) Error() string {
	return fmt.Sprintf("%s=%s spans %s values %v: %s does not nest in %s", e.Inner, e.Value, e.Outer, e.Outers, e.Inner, e.Outer)
}

// Nests checks that every value of inner lies under one value of outer on
// the nodes that carry both (a rack in one zone); nil when it does.
func Nests(snap *snapshot.Snapshot, inner, outer string) *NestError {
	under := map[string]map[string]bool{}
	for _, ni := range snap.Nodes {
		iv, ok1 := ni.Node.Labels[inner]
		ov, ok2 := ni.Node.Labels[outer]
		if !ok1 || !ok2 {
			continue
		}
		if under[iv] == nil {
			under[iv] = map[string]bool{}
		}
		under[iv][ov] = true
	}
	values := make([]string, 0, len(under))
	for v := range under {
		values = append(values, v)
	}
	sort.Strings(values)
	for _, v := range values {
		if len(under[v]) > 1 {
			var outers []string
			for o := range under[v] {
				outers = append(outers, o)
			}
			sort.Strings(outers)
			return &NestError{Inner: inner, Outer: outer, Value: v, Outers: outers}
		}
	}
	return nil
}

// Levels orders keys narrowest first, as the cluster nests them (a key
// nests in another when Nests says so); keys that nest in no other
// order by how many domains they have (more domains: narrower).
func Levels(snap *snapshot.Snapshot, keys []string) []string {
	count := map[string]int{}
	for _, k := range keys {
		ds, _ := Domains(snap, k)
		count[k] = len(ds)
	}
	out := append([]string(nil), keys...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case Nests(snap, a, b) == nil && Nests(snap, b, a) != nil:
			return true
		case Nests(snap, b, a) == nil && Nests(snap, a, b) != nil:
			return false
		}
		return count[a] > count[b]
	})
	return out
}
