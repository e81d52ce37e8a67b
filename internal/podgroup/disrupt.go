package podgroup

import lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"

// DisruptScope is the CompositePodGroup whose whole subtree goes when pg
// is disrupted whole: from pg's parent upwards, as long as each
// CompositePodGroup has disruptionMode all (Lockstep's default), the
// highest one reached. It is nil when pg is no tree's, or its parent has
// disruptionMode single (pg goes alone). A missing CompositePodGroup (get
// returns nil) or a cycle ends the walk.
func DisruptScope(pg *lockv1.PodGroup, get func(name string) *lockv1.CompositePodGroup) *lockv1.CompositePodGroup {
	var scope *lockv1.CompositePodGroup
	seen := map[string]bool{}
	for name := ParentOf(pg); name != "" && !seen[name]; {
		seen[name] = true
		c := get(name)
		if c == nil || !CompositeDisruptAll(c) {
			break
		}
		scope, name = c, CompositeParent(c)
	}
	return scope
}

// Under reports whether pg hangs, at any depth, under the CompositePodGroup
// named scope.
func Under(pg *lockv1.PodGroup, scope string, get func(name string) *lockv1.CompositePodGroup) bool {
	seen := map[string]bool{}
	for name := ParentOf(pg); name != "" && !seen[name]; {
		if name == scope {
			return true
		}
		seen[name] = true
		c := get(name)
		if c == nil {
			return false
		}
		name = CompositeParent(c)
	}
	return false
}
