package preemption

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Allowed reports whether a unit may preempt: only when neither its group's
// preemptionPolicy nor any of pods' (set from their PriorityClass by the API
// server's Priority admission) is Never. A group's policy can make
// preemption stricter, never grant it: the pods' policy is what the API
// server admitted them with, and a PodGroup is written by its namespace's
// users. pg may be nil (a lone pod).
func Allowed(pg *lockv1.PodGroup, pods []*corev1.Pod) bool { return Forbidden(pg, pods) == "" }

// Forbidden says who forbids the unit to preempt ("" when nothing does):
// "PodGroup ns/name" or "pod ns/name (from its PriorityClass)".
func Forbidden(pg *lockv1.PodGroup, pods []*corev1.Pod) string {
	if pg != nil && pg.Spec.PreemptionPolicy != nil && *pg.Spec.PreemptionPolicy == lockv1.PreemptNever {
		return fmt.Sprintf("PodGroup %s/%s", pg.Namespace, pg.Name)
	}
	for _, p := range pods {
		if p.Spec.PreemptionPolicy != nil && *p.Spec.PreemptionPolicy == corev1.PreemptNever {
			return fmt.Sprintf("pod %s/%s (from its PriorityClass)", p.Namespace, p.Name)
		}
	}
	return ""
}

// Candidates groups the running pods into victim units: the Lockstep pods
// of a PodGroup with disruptionMode all are one unit (at the group's
// priority), anything else is one unit per pod. group resolves a PodGroup
// and its priority (nil when it does not exist).
func Candidates(pods []*corev1.Pod, group func(ns, name string) (*lockv1.PodGroup, int32)) []Candidate {
	return TreeCandidates(pods, group, nil)
}

// TreeCandidates is Candidates where a PodGroup with disruptionMode all in
// a scheduling tree is evicted with the subtree its CompositePodGroups'
// disruptionMode ties it to (podgroup.DisruptScope): one unit of the pods
// of every such group under that CompositePodGroup, at the highest of
// their priorities (a tree is only evicted for a preemptor above all of
// it); under a parent with disruptionMode single the group is its own
// unit. composite resolves a CompositePodGroup (nil when it does not
// exist); a nil composite sees no trees.
func TreeCandidates(pods []*corev1.Pod, group func(ns, name string) (*lockv1.PodGroup, int32), composite func(ns, name string) *lockv1.CompositePodGroup) []Candidate {
	groups := map[types.NamespacedName]*Candidate{}
	trees := map[types.NamespacedName]*Candidate{}
	var out []Candidate
	for _, p := range pods {
		if !podgroup.Active(p) {
			continue
		}
		single := Candidate{Name: fmt.Sprintf("pod %s/%s", p.Namespace, p.Name), Priority: corev1helpers.PodPriority(p), Pods: []*corev1.Pod{p}}
		g := podgroup.GroupOf(p)
		if !podgroup.Ours(p) || g == "" {
			out = append(out, single)
			continue
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: g}
		if c := groups[key]; c != nil {
			c.Pods = append(c.Pods, p)
			continue
		}
		single.Group = key
		pg, prio := group(p.Namespace, g)
		if pg == nil {
			out = append(out, single)
			continue
		}
		single.Priority, single.Annotations = prio, pg.Annotations
		if !podgroup.DisruptAll(pg) {
			out = append(out, single)
			continue
		}
		if c := treeOf(trees, pg, prio, composite); c != nil {
			c.Pods = append(c.Pods, p)
			groups[key] = c
			continue
		}
		groups[key] = &Candidate{Name: fmt.Sprintf("PodGroup %s/%s", key.Namespace, key.Name), Group: key, Priority: prio, Pods: []*corev1.Pod{p}, Whole: true, Annotations: pg.Annotations}
	}
	seen := map[*Candidate]bool{}
	for _, c := range groups {
		if !seen[c] {
			seen[c] = true
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// treeOf is the candidate of the subtree pg goes with, created or raised
// to prio; nil when pg goes alone.
func treeOf(trees map[types.NamespacedName]*Candidate, pg *lockv1.PodGroup, prio int32, composite func(ns, name string) *lockv1.CompositePodGroup) *Candidate {
	if composite == nil || podgroup.ParentOf(pg) == "" {
		return nil
	}
	scope := podgroup.DisruptScope(pg, func(name string) *lockv1.CompositePodGroup { return composite(pg.Namespace, name) })
	if scope == nil {
		return nil
	}
	key := types.NamespacedName{Namespace: pg.Namespace, Name: scope.Name}
	c := trees[key]
	if c == nil {
		c = &Candidate{Name: fmt.Sprintf("CompositePodGroup %s/%s", key.Namespace, key.Name), Tree: key, Priority: prio, Whole: true, Annotations: scope.Annotations}
		trees[key] = c
	}
	c.Priority = max(c.Priority, prio)
	return c
}
