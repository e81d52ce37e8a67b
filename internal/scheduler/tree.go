package scheduler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamiclister"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// resolveTree reads the tree rooted at k from the caches: nil when its root
// does not exist, or is not a root (its own root is queued instead).
func (s *Scheduler) resolveTree(k queue.Key) (*unit, error) {
	root, err := s.composite(k.Namespace, k.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if p := podgroup.CompositeParent(root); p != "" {
		r, reason, why := podgroup.RootOf(p, s.compositeGetter(k.Namespace))
		if r == nil {
			return &unit{key: k, root: root, tree: &podgroup.TreeUnit{Root: &podgroup.Tree{Composite: root}, Waiting: why, WaitReason: reason}}, nil
		}
		s.queue.Add(queue.TreeKey(k.Namespace, r.Name))
		return nil, nil
	}
	composites, err := s.composites(k.Namespace)
	if err != nil {
		return nil, err
	}
	groups, err := s.treeGroups(k.Namespace)
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, pg := range groups {
		members, err := s.groupPods(pg.Namespace, pg.Name)
		if err != nil {
			return nil, err
		}
		pods = append(pods, members...)
	}
	return &unit{key: k, root: root, tree: podgroup.ResolveTree(root, composites, groups, pods, s.assumedNodes(), s.kueueWords())}, nil
}

// treeGroups are the PodGroups of ns that hang in a tree (name a parent).
func (s *Scheduler) treeGroups(ns string) ([]*lockv1.PodGroup, error) {
	objs, err := s.listers.podGroups.Namespace(ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var groups []*lockv1.PodGroup
	for _, o := range objs {
		if pg, err := podgroup.FromUnstructured(o); err == nil && podgroup.ParentOf(pg) != "" {
			groups = append(groups, pg)
		}
	}
	return groups, nil
}

// composites are the CompositePodGroups of ns.
func (s *Scheduler) composites(ns string) ([]*lockv1.CompositePodGroup, error) {
	var out []*lockv1.CompositePodGroup
	for _, l := range []interface {
		List(labels.Selector) ([]*unstructured.Unstructured, error)
	}{listIn(s.listers.composites, ns), listIn(s.listers.upstreamComposites, ns)} {
		if l == nil {
			continue
		}
		objs, err := l.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if c, err := podgroup.CompositeFromUnstructured(o); err == nil {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// listIn is l's lister of namespace ns; nil when l is (a kind not served).
func listIn(l dynamiclister.Lister, ns string) interface {
	List(labels.Selector) ([]*unstructured.Unstructured, error)
} {
	if l == nil {
		return nil
	}
	return l.Namespace(ns)
}

// treeOrder is a tree's priority (the lowest of its members') and age (its
// root's). The queue calls it, sometimes under its lock: it only reads the
// caches — it never resolves the tree nor queues anything (a key that is
// not a root orders as its own composite; resolveTree requeues its root).
func (s *Scheduler) treeOrder(k queue.Key) (int32, time.Time) {
	root, err := s.composite(k.Namespace, k.Name)
	if err != nil {
		return 0, time.Time{}
	}
	composites, err := s.composites(k.Namespace)
	if err != nil {
		return 0, root.CreationTimestamp.Time
	}
	under := map[string]bool{root.Name: true}
	get := s.compositeGetter(k.Namespace)
	for _, c := range composites {
		if r, _, _ := podgroup.RootOf(c.Name, get); r != nil && r.Name == root.Name {
			under[c.Name] = true
		}
	}
	objs, err := s.listers.podGroups.Namespace(k.Namespace).List(labels.Everything())
	if err != nil {
		return 0, root.CreationTimestamp.Time
	}
	var pods []*corev1.Pod
	for _, o := range objs {
		pg, err := podgroup.FromUnstructured(o)
		if err != nil || !under[podgroup.ParentOf(pg)] {
			continue
		}
		members, err := s.groupPods(pg.Namespace, pg.Name)
		if err == nil {
			pods = append(pods, members...)
		}
	}
	prio, _ := podgroup.Priority(pods)
	return prio, root.CreationTimestamp.Time
}

func waitReason(r string) string {
	if r == "" {
		return lockv1.PodGroupReasonWaitingForPods
	}
	return r
}

// reportTree writes what a tree that is not admitted means: each
// composite's condition with its arithmetic (the root's with the whole
// summary), each leaf's condition, and each pending member's condition —
// in words that change only with the cause, as for a gang.
func (s *Scheduler) reportTree(ctx context.Context, u *unit, d decide.Decision, note string) {
	msg := d.Summary
	if note != "" {
		msg += "; " + note
	}
	rootName := u.root.Name
	podMsg := fmt.Sprintf("CompositePodGroup %s: the scheduling tree does not fit; its %s condition has the arithmetic", rootName, lockv1.CompositePodGroupInitiallyScheduled)
	if d.Kind == decide.Preempt {
		podMsg = fmt.Sprintf("CompositePodGroup %s: preempting lower-priority pods to make room for the tree; this pod waits for them to go", rootName)
	}
	nominated := s.nominatedNodes(u.key)
	for _, g := range u.leaves() {
		if g.Group != nil {
			s.setCondition(ctx, g.Group, metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable, "the scheduling tree of CompositePodGroup "+rootName+" does not fit: "+msg)
		}
		for _, p := range g.Pending {
			if s.setPodUnschedulable(p, podMsg, nominated[p.UID]) {
				s.recorder.Eventf(p, u.root, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", "%s", podMsg)
			}
		}
	}
	if d.Root != nil {
		d.Root.Walk(func(n *placement.TreeNode) {
			if n.Leaf != nil || d.Nodes[n].Composite == u.root {
				return
			}
			if v, ok := d.Tree.Verdicts[n]; ok {
				s.setCompositeCondition(ctx, d.Nodes[n].Composite, metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable,
					fmt.Sprintf("%d of %d groups fit (minGroupCount %d) in %s; the tree does not", v.Counted, v.Of, max(n.MinGroupCount, 1), v.Domain))
			}
		})
	}
	s.setCompositeCondition(ctx, u.root, metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable, msg)
	s.recorder.Eventf(u.root, nil, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", "%s", msg)
}

// reportComposites writes, for a tree whose bound members were just
// bound, each composite's InitiallyScheduled=True with its verdict, and
// an event on its root; a flat unit has no composites.
func (s *Scheduler) reportComposites(ctx context.Context, u *unit, d decide.Decision, bound int) {
	if u.root == nil {
		return
	}
	d.Root.Walk(func(n *placement.TreeNode) {
		if n.Leaf != nil {
			return
		}
		v := d.Tree.Verdicts[n]
		s.setCompositeCondition(ctx, d.Nodes[n].Composite, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled,
			fmt.Sprintf("%d of %d groups placed (minGroupCount %d) in %s", v.Counted, v.Of, max(n.MinGroupCount, 1), v.Domain))
	})
	s.recorder.Eventf(u.root, nil, corev1.EventTypeNormal, eventScheduled, "Scheduling", "placed %d pods of the tree", bound)
}

// setCompositeCondition writes CompositePodGroupInitiallyScheduled if it
// changed (as the cache has the group); once True it stays True (as
// upstream's). A conflict reads the group again.
func (s *Scheduler) setCompositeCondition(ctx context.Context, c *lockv1.CompositePodGroup, status metav1.ConditionStatus, reason, msg string) {
	if c == nil {
		return
	}
	gvr := podgroup.CompositeResourceOf(c)
	fresh, rootScheduled, created := false, false, time.Time{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rootScheduled = false
		cur, err := s.composite(c.Namespace, c.Name)
		if fresh {
			var u *unstructured.Unstructured
			if u, err = s.dynamic.Resource(gvr).Namespace(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{}); err == nil {
				cur, err = podgroup.CompositeFromUnstructured(u)
			}
		}
		fresh = true
		if err != nil {
			return err
		}
		old := meta.FindStatusCondition(cur.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled)
		if old != nil && (old.Status == metav1.ConditionTrue && status != metav1.ConditionTrue || old.Status == status && old.Reason == reason && old.Message == msg) {
			return nil
		}
		rootScheduled = status == metav1.ConditionTrue && (old == nil || old.Status != metav1.ConditionTrue) && podgroup.CompositeParent(cur) == ""
		created = cur.CreationTimestamp.Time
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: lockv1.CompositePodGroupInitiallyScheduled, Status: status, Reason: reason, Message: msg, ObservedGeneration: cur.Generation})
		obj, err := podgroup.CompositeToUnstructured(cur)
		if err != nil {
			return err
		}
		_, err = s.dynamic.Resource(gvr).Namespace(c.Namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "Writing CompositePodGroup status", "compositePodGroup", klog.KObj(c))
	}
	if err == nil && rootScheduled {
		s.metrics.TreeTimeToScheduled.Observe(s.clock.Since(created).Seconds())
	}
}
