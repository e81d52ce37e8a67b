package integrity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// ReasonTreeMemberLost ends the incarnation of a group of a scheduling tree
// taken down because another group under the same disruptionMode-all
// CompositePodGroup lost a member.
const ReasonTreeMemberLost = "TreeMemberLost"

// TreeRestart is a group of a tree that a loss elsewhere in the tree takes
// down: its incarnation as it must be stored (ended).
type TreeRestart struct {
	Group       *lockv1.PodGroup
	Incarnation *lockv1.PodGroupIncarnation
}

// lossEnded reports whether an incarnation ended for a member loss of its
// own (not a completion, its owner stopping, a preemption, or its tree).
func lossEnded(inc *lockv1.PodGroupIncarnation) bool {
	if inc == nil || inc.Ended == nil {
		return false
	}
	switch inc.Ended.Reason {
	case ReasonCompleted, ReasonOwnerStopped, lockv1.PodGroupReasonPreemption, ReasonTreeMemberLost:
		return false
	}
	return true
}

// TreeRestarts are the groups pg's restart takes down with it: when pg's
// incarnation ended for a member loss, every other group under its
// podgroup.DisruptScope whose incarnation runs and was bound before that loss (a later
// one is the tree placed again). A group that finished, was stopped by its
// owner or was never admitted is left alone. It is pure.
func TreeRestarts(pg *lockv1.PodGroup, groups []*lockv1.PodGroup, get func(name string) *lockv1.CompositePodGroup) []TreeRestart {
	inc := pg.Status.Incarnation
	if !lossEnded(inc) {
		return nil
	}
	scope := podgroup.DisruptScope(pg, get)
	if scope == nil {
		return nil
	}
	var out []TreeRestart
	for _, g := range groups {
		cur := g.Status.Incarnation
		if g.Name == pg.Name || g.Namespace != pg.Namespace || cur == nil || cur.Ended != nil ||
			cur.BoundTime.After(inc.Ended.Time.Time) || !podgroup.Under(g, scope.Name, get) {
			continue
		}
		next := cur.DeepCopy()
		next.Ended = &lockv1.PodGroupIncarnationEnd{
			Reason: ReasonTreeMemberLost,
			Message: fmt.Sprintf("PodGroup %s lost a member (%s) and CompositePodGroup %s restarts its tree whole (disruptionMode all)",
				pg.Name, inc.Ended.Message, scope.Name),
			Time: inc.Ended.Time,
		}
		out = append(out, TreeRestart{Group: g, Incarnation: next})
	}
	return out
}

// restartTree ends the incarnations TreeRestarts names, each with its
// DisruptionTarget condition, event and metric; each group's own
// reconciliation then evicts its members from that record. It runs on
// every reconciliation of a tree's group whose incarnation ended for a
// loss, so a restart interrupted part way is finished.
func (r *Reconciler) restartTree(ctx context.Context, pg *lockv1.PodGroup, inc *lockv1.PodGroupIncarnation) error {
	if podgroup.ParentOf(pg) == "" || !lossEnded(inc) {
		return nil
	}
	// Not served (the CRD is missing): no parent exists, the group
	// restarts alone.
	composites := &lockv1.CompositePodGroupList{}
	if err := r.Client.List(ctx, composites, client.InNamespace(pg.Namespace)); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing CompositePodGroups: %w", err)
	}
	byName := map[string]*lockv1.CompositePodGroup{}
	for i := range composites.Items {
		byName[composites.Items[i].Name] = &composites.Items[i]
	}
	groups := &lockv1.PodGroupList{}
	if err := r.Client.List(ctx, groups, client.InNamespace(pg.Namespace)); err != nil {
		return fmt.Errorf("listing PodGroups: %w", err)
	}
	all := make([]*lockv1.PodGroup, 0, len(groups.Items))
	for i := range groups.Items {
		all = append(all, &groups.Items[i])
	}
	at := pg.DeepCopy()
	at.Status.Incarnation = inc
	restarts := TreeRestarts(at, all, func(name string) *lockv1.CompositePodGroup { return byName[name] })
	if len(restarts) == 0 {
		return nil
	}
	// A group its owner deleted, with its pods, may still be in the cache
	// with its members gone: that is no loss for the tree.
	cur := &lockv1.PodGroup{}
	if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(pg), cur); err != nil || cur.UID != pg.UID || cur.DeletionTimestamp != nil {
		return client.IgnoreNotFound(err)
	}
	for _, tr := range restarts {
		if err := r.endWithTree(ctx, tr); err != nil {
			return err
		}
	}
	return nil
}

// endWithTree records one group's end with its tree.
func (r *Reconciler) endWithTree(ctx context.Context, tr TreeRestart) error {
	g := tr.Group.DeepCopy()
	g.Status.Incarnation = tr.Incarnation
	end := tr.Incarnation.Ended
	meta.SetStatusCondition(&g.Status.Conditions, metav1.Condition{
		Type: lockv1.DisruptionTarget, Status: metav1.ConditionTrue, Reason: ReasonTreeMemberLost,
		Message: end.Message, ObservedGeneration: g.Generation,
	})
	if err := r.Client.Status().Update(ctx, g); err != nil {
		return client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("Tree lost a member; restarting this group with it", "podGroup", klogRef(g), "detail", end.Message)
	r.metrics.GangRestarts.WithLabelValues(ReasonTreeMemberLost).Inc()
	r.Recorder.Eventf(g, corev1.EventTypeWarning, "GangRestart", "%s: restarting this gang with its tree", end.Message)
	return nil
}

// TreeShort names the gang CompositePodGroup, between pg and its
// disruption scope (podgroup.DisruptScope), that has fewer children than
// its minGroupCount among groups and composites — a child deleted after
// the tree was admitted — with its count; "" when none is (or pg hangs in
// no tree, or its tree is disrupted group by group). Children being
// deleted do not count. wanted, when the group's owner is known, counts
// the groups the owner now wants under each composite: a composite's spec
// is immutable, so an owner that dropped a role lowers what it needs to
// that. It is pure.
func TreeShort(pg *lockv1.PodGroup, groups []*lockv1.PodGroup, composites []*lockv1.CompositePodGroup, wanted map[string]int) string {
	byName := map[string]*lockv1.CompositePodGroup{}
	children := map[string]int{}
	for _, c := range composites {
		if c.Namespace != pg.Namespace {
			continue
		}
		byName[c.Name] = c
		if p := podgroup.CompositeParent(c); p != "" && c.DeletionTimestamp == nil {
			children[p]++
		}
	}
	for _, g := range groups {
		if p := podgroup.ParentOf(g); p != "" && g.Namespace == pg.Namespace && g.DeletionTimestamp == nil {
			children[p]++
		}
	}
	get := func(name string) *lockv1.CompositePodGroup { return byName[name] }
	scope := podgroup.DisruptScope(pg, get)
	if scope == nil {
		return ""
	}
	seen := map[string]bool{}
	for name := podgroup.ParentOf(pg); name != "" && !seen[name]; {
		seen[name] = true
		c := get(name)
		if c == nil {
			return ""
		}
		gang, need := podgroup.CompositeGang(c)
		if w, ok := wanted[c.Name]; ok {
			need = min(need, w)
		}
		if gang && children[c.Name] < need {
			return fmt.Sprintf("CompositePodGroup %s has %d of minGroupCount %d groups (one was deleted) and restarts its tree whole (disruptionMode all)", c.Name, children[c.Name], need)
		}
		if c.Name == scope.Name {
			break
		}
		name = podgroup.CompositeParent(c)
	}
	return ""
}

// treeShort is TreeShort for a running group of a tree: judged on the
// caches and, when they show a shortage, confirmed on the API server (a
// cache may not have seen a child yet).
func (r *Reconciler) treeShort(ctx context.Context, pg *lockv1.PodGroup, wanted map[string]int) (string, error) {
	inc := pg.Status.Incarnation
	if podgroup.ParentOf(pg) == "" || inc == nil || inc.Ended != nil {
		return "", nil
	}
	judge := func(c client.Reader) (string, error) {
		composites := &lockv1.CompositePodGroupList{}
		if err := c.List(ctx, composites, client.InNamespace(pg.Namespace)); err != nil {
			if meta.IsNoMatchError(err) {
				return "", nil // not served: no tree
			}
			return "", fmt.Errorf("listing CompositePodGroups: %w", err)
		}
		groups := &lockv1.PodGroupList{}
		if err := c.List(ctx, groups, client.InNamespace(pg.Namespace)); err != nil {
			return "", fmt.Errorf("listing PodGroups: %w", err)
		}
		cs := make([]*lockv1.CompositePodGroup, 0, len(composites.Items))
		for i := range composites.Items {
			cs = append(cs, &composites.Items[i])
		}
		gs := make([]*lockv1.PodGroup, 0, len(groups.Items))
		for i := range groups.Items {
			gs = append(gs, &groups.Items[i])
		}
		return TreeShort(pg, gs, cs, wanted), nil
	}
	if short, err := judge(r.Client); short == "" || err != nil {
		return short, err
	}
	return judge(r.Reader)
}
