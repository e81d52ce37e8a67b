package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamiclister"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// scheduleTree runs one cycle for a scheduling tree: the root
// CompositePodGroup's whole tree is decided at once (decide.DecideTree)
// and carried out in one binding cycle.
func (s *Scheduler) scheduleTree(ctx context.Context, it queue.Item) {
	k := it.Key
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "tree", k)
	ctx = klog.NewContext(ctx, logger)
	start := s.clock.Now()
	root, tu, err := s.resolveTree(k)
	switch {
	case err != nil:
		logger.Error(err, "Resolving tree")
		s.queue.Retry(k)
		return
	case tu == nil:
		s.queue.Done(k)
		return
	}
	for _, leaf := range tu.Root.Leaves() {
		if leaf.Group != nil && !podgroup.Upstream(leaf.Group) && len(leaf.Pending) == 0 && podgroup.Unrecorded(leaf.Group.Status.Incarnation, leaf.Pods) > 0 {
			s.recordIncarnation(ctx, &unit{key: k, Unit: leaf}, nil)
		}
	}
	if tu.Waiting == "" && tu.Root.Pending() == 0 {
		s.reportTreeBound(ctx, k, tu.Root)
		s.state.Cache.DropNomination(k.String())
		s.queue.Done(k)
		return
	}
	nc := s.checkNomination(k) // before the snapshot: see checkNomination
	decideStart := s.clock.Now()
	snap := s.state.Snapshot(ctx, k.String(), it.Priority)
	tree := &unit{key: k, Unit: &podgroup.Unit{}, tree: tu, root: root}
	d := decide.DecideTree(ctx, snap, s.state.CEL, decide.TreeInput{Tree: tu, Priority: it.Priority, Preemption: func() (*decide.Preemption, error) {
		return s.preemptionInput(ctx, tree, nc)
	}})
	s.metrics.AlgorithmDuration.Observe(s.clock.Since(decideStart).Seconds())
	logger.V(1).Info("Decided", "decision", d.Kind, "pending", tu.Root.Pending(), "placed", len(d.Result.Assignments()), "took", s.clock.Since(start))
	s.executeTree(ctx, tree, d, start, it.Priority)
}

// resolveTree reads the tree rooted at k from the caches: nil when its root
// does not exist, or is not a root (its own root is queued instead).
func (s *Scheduler) resolveTree(k queue.Key) (*lockv1.CompositePodGroup, *podgroup.TreeUnit, error) {
	root, err := s.composite(k.Namespace, k.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if p := podgroup.CompositeParent(root); p != "" {
		r, reason, why := podgroup.RootOf(p, s.compositeGetter(k.Namespace))
		if r == nil {
			return root, &podgroup.TreeUnit{Root: &podgroup.Tree{Composite: root}, Waiting: why, WaitReason: reason}, nil
		}
		s.queue.Add(queue.TreeKey(k.Namespace, r.Name))
		return nil, nil, nil
	}
	composites, err := s.composites(k.Namespace)
	if err != nil {
		return nil, nil, err
	}
	var groups []*lockv1.PodGroup
	var pods []*corev1.Pod
	objs, err := s.listers.podGroups.Namespace(k.Namespace).List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	for _, o := range objs {
		pg, err := podgroup.FromUnstructured(o)
		if err != nil || podgroup.ParentOf(pg) == "" {
			continue
		}
		members, err := s.groupPods(pg.Namespace, pg.Name)
		if err != nil {
			return nil, nil, err
		}
		groups, pods = append(groups, pg), append(pods, members...)
	}
	return root, podgroup.ResolveTree(root, composites, groups, pods, s.assumedNode), nil
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
// not a root orders as its own composite; scheduleTree requeues its root).
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

// executeTree carries a tree decision out: its API writes and exactly one
// queue transition.
func (s *Scheduler) executeTree(ctx context.Context, t *unit, d decide.TreeDecision, start time.Time, prio int32) {
	k := t.key
	switch d.Kind {
	case decide.Wait:
		s.setCompositeCondition(ctx, t.root, metav1.ConditionFalse, waitReason(d.WaitReason), d.Reason)
		for _, leaf := range t.tree.Root.Leaves() {
			if leaf.Waiting != "" {
				s.reportWaiting(ctx, &unit{key: k, Unit: leaf}, leaf.Waiting, leaf.WaitReason)
			}
		}
		s.queue.Wait(k)
	case decide.Error:
		s.observeTree(start, metrics.ResultError)
		msg := "scheduler error: " + d.Err.Error()
		s.setCompositeCondition(ctx, t.root, metav1.ConditionFalse, lockv1.PodGroupReasonSchedulerError, msg)
		s.recorder.Eventf(t.root, nil, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", "%s", msg)
		if errors.Is(d.Err, placement.ErrMissingClaim) {
			s.queue.Wait(k)
		} else {
			s.queue.Retry(k)
		}
	case decide.Bind:
		s.binder.assume(d.Result.Assignments())
		s.state.Cache.DropNomination(k.String())
		s.goBind(ctx, func(ctx context.Context) { s.bindTree(ctx, t, d, start) })
	default: // Unschedulable, Preempt
		if d.DropNomination {
			s.state.Cache.DropNomination(k.String())
		}
		note, victimsGoing := s.preempt(ctx, t, prio, decide.Decision{Kind: d.Kind, Plan: d.Plan, Reason: d.Reason})
		s.reportTree(ctx, t, d, note)
		s.observeTree(start, metrics.ResultUnschedulable)
		if victimsGoing {
			s.queue.WaitFor(k, victimPoll)
		} else {
			s.queue.Unschedulable(k)
		}
	}
}

func waitReason(r string) string {
	if r == "" {
		return lockv1.PodGroupReasonWaitingForPods
	}
	return r
}

// bindTree is a tree's binding cycle: every leaf's bindings, each leaf's
// incarnation and status, each composite's condition.
func (s *Scheduler) bindTree(ctx context.Context, t *unit, d decide.TreeDecision, start time.Time) {
	logger := klog.FromContext(ctx)
	bound, err := s.binder.bind(ctx, d.Result.Assignments())
	boundUIDs := map[types.UID]bool{}
	for _, p := range bound {
		boundUIDs[p.UID] = true
	}
	for n, u := range d.Units {
		var mine []*corev1.Pod
		for _, a := range d.Result.Leaves[n].Assignments {
			if boundUIDs[a.Pod.UID] {
				mine = append(mine, a.Pod)
			}
		}
		if len(mine) > 0 && !podgroup.Upstream(u.Group) {
			s.recordIncarnation(ctx, &unit{key: t.key, Unit: u}, mine)
		}
	}
	if err != nil {
		s.observeTree(start, metrics.ResultError)
		logger.Error(err, "Binding failed; tree requeued")
		msg := "scheduler error: " + err.Error()
		s.setCompositeCondition(ctx, t.root, metav1.ConditionFalse, lockv1.PodGroupReasonSchedulerError, msg)
		s.queue.Retry(t.key)
		return
	}
	complete := true
	for n, u := range d.Units {
		ld := d.Leaf(n)
		if ld.Outcome.Admitted {
			s.reportPlaced(ctx, &unit{key: t.key, Unit: u}, ld, "")
		}
		if !ld.Outcome.Complete() && len(u.Pending) > 0 {
			complete = false
		}
	}
	d.Root.Walk(func(n *placement.TreeNode) {
		if n.Leaf != nil {
			return
		}
		v := d.Result.Verdicts[n]
		s.setCompositeCondition(ctx, d.Nodes[n].Composite, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled,
			fmt.Sprintf("%d of %d groups placed (minGroupCount %d) in %s", v.Counted, v.Of, max(n.MinGroupCount, 1), v.Domain))
	})
	s.recorder.Eventf(t.root, nil, corev1.EventTypeNormal, eventScheduled, "Scheduling", "placed %d pods of the tree", len(bound))
	s.observeTree(start, metrics.ResultScheduled)
	if complete {
		s.queue.Done(t.key)
	} else {
		s.queue.Unschedulable(t.key)
	}
}

// reportTreeBound writes, for a tree with nothing pending, the conditions
// its bound members earn that no one wrote — a scheduler that died between
// binding the tree and writing its status: each leaf's as a bound group's
// (reportBound), each composite whose children meet its minGroupCount
// InitiallyScheduled=True. A condition that is True already is left as it
// is, so a running tree costs no write.
func (s *Scheduler) reportTreeBound(ctx context.Context, k queue.Key, t *podgroup.Tree) {
	t.Walk(func(n *podgroup.Tree) {
		if n.Unit != nil {
			s.reportBound(ctx, &unit{key: k, Unit: n.Unit})
			return
		}
		whole, counted, of := n.BoundWhole()
		if !whole || meta.IsStatusConditionTrue(n.Composite.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled) {
			return
		}
		_, need := podgroup.CompositeGang(n.Composite)
		s.setCompositeCondition(ctx, n.Composite, metav1.ConditionTrue, lockv1.PodGroupReasonScheduled,
			fmt.Sprintf("%d of %d groups placed (minGroupCount %d)", counted, of, max(need, 1)))
	})
}

// reportTree writes what a tree that is not admitted means: each
// composite's condition with its arithmetic (the root's with the whole
// summary), each leaf's condition, and each pending member's condition —
// in words that change only with the cause, as for a gang.
func (s *Scheduler) reportTree(ctx context.Context, t *unit, d decide.TreeDecision, note string) {
	msg := d.Summary
	if note != "" {
		msg += "; " + note
	}
	rootName := t.root.Name
	podMsg := fmt.Sprintf("CompositePodGroup %s: the scheduling tree does not fit; its %s condition has the arithmetic", rootName, lockv1.CompositePodGroupInitiallyScheduled)
	if d.Kind == decide.Preempt {
		podMsg = fmt.Sprintf("CompositePodGroup %s: preempting lower-priority pods to make room for the tree; this pod waits for them to go", rootName)
	}
	nominated := s.nominatedNodes(t.key)
	for _, leaf := range t.tree.Root.Leaves() {
		if leaf.Group != nil {
			s.setCondition(ctx, leaf.Group, metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable, "the scheduling tree of CompositePodGroup "+rootName+" does not fit: "+msg)
		}
		for _, p := range leaf.Pending {
			if s.setPodUnschedulable(p, podMsg, nominated[p.UID]) {
				s.recorder.Eventf(p, t.root, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", "%s", podMsg)
			}
		}
	}
	if d.Root != nil {
		d.Root.Walk(func(n *placement.TreeNode) {
			if n.Leaf != nil || d.Nodes[n].Composite == t.root {
				return
			}
			if v, ok := d.Result.Verdicts[n]; ok {
				s.setCompositeCondition(ctx, d.Nodes[n].Composite, metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable,
					fmt.Sprintf("%d of %d groups fit (minGroupCount %d) in %s; the tree does not", v.Counted, v.Of, max(n.MinGroupCount, 1), v.Domain))
			}
		})
	}
	s.setCompositeCondition(ctx, t.root, metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable, msg)
	s.recorder.Eventf(t.root, nil, corev1.EventTypeWarning, eventFailedScheduling, "Scheduling", "%s", msg)
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
