package integrity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// listOver: more members than this to confirm are looked for with one
// label-selected list of the group's pods first, not one read each.
const listOver = 4

// readRounds bounds the read-and-decide rounds of one verdict. Two suffice:
// a member read from the API server may run on a node the cache does not
// hold, which the second round reads; a third would be a bug.
const readRounds = 2

// decide is Decide on the caches' view, confirmed by reads from the API
// server (Confirmed).
func (r *Reconciler) decide(ctx context.Context, v View) (Verdict, error) {
	return Confirmed(v, func(c *Confirm, into *Reads) error {
		ctrl.LoggerFrom(ctx).V(2).Info("Caches do not show what a verdict would rest on; reading it from the API server",
			"podGroup", klog.KObj(v.Group), "pods", len(c.Pods), "nodes", c.Nodes)
		return r.read(ctx, v.Group, c, into)
	})
}

// Confirmed is Decide, confirmed: while the verdict asks to confirm what it
// would rest on, read fills in those objects as the API server has them and
// the group is judged again with the reads. A member the pod cache has not
// seen is thus judged by its pod as it is, never taken for deleted.
func Confirmed(v View, read func(*Confirm, *Reads) error) (Verdict, error) {
	vd := Decide(v)
	for round := 0; vd.Confirm != nil; round++ {
		if round == readRounds {
			return Verdict{}, fmt.Errorf("PodGroup %s: verdict unconfirmed after %d rounds of reads (pods %d, nodes %v)", klog.KObj(v.Group), round, len(vd.Confirm.Pods), vd.Confirm.Nodes)
		}
		if v.Read == nil {
			v.Read = &Reads{Pods: map[types.UID]*corev1.Pod{}, Nodes: map[string]*corev1.Node{}}
		}
		if err := read(vd.Confirm, v.Read); err != nil {
			return Verdict{}, err
		}
		vd = Decide(v)
	}
	return vd, nil
}

// read reads what c names from the API server into into: a member whose
// name the API server has no pod of, or a pod of another UID, is nil
// (deleted); so is a node it does not have.
func (r *Reconciler) read(ctx context.Context, pg *lockv1.PodGroup, c *Confirm, into *Reads) error {
	listed := map[types.UID]*corev1.Pod{}
	if len(c.Pods) > listOver {
		pods := &corev1.PodList{}
		if err := r.Reader.List(ctx, pods, client.InNamespace(pg.Namespace), client.MatchingLabels{lockv1.PodGroupLabel: pg.Name}); err != nil {
			return fmt.Errorf("listing the pods of PodGroup %s: %w", klog.KObj(pg), err)
		}
		for i := range pods.Items {
			listed[pods.Items[i].UID] = &pods.Items[i]
		}
	}
	for _, m := range c.Pods {
		if p := listed[m.UID]; p != nil {
			into.Pods[m.UID] = p
			continue
		}
		p := &corev1.Pod{}
		err := r.Reader.Get(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: m.Name}, p)
		switch {
		case apierrors.IsNotFound(err) || err == nil && p.UID != m.UID:
			into.Pods[m.UID] = nil
		case err != nil:
			return fmt.Errorf("reading member %s of PodGroup %s: %w", m.Name, klog.KObj(pg), err)
		default:
			into.Pods[m.UID] = p
		}
	}
	for _, name := range c.Nodes {
		n := &corev1.Node{}
		err := r.Reader.Get(ctx, types.NamespacedName{Name: name}, n)
		switch {
		case apierrors.IsNotFound(err):
			into.Nodes[name] = nil
		case err != nil:
			return fmt.Errorf("reading node %s: %w", name, err)
		default:
			into.Nodes[name] = n
		}
	}
	return nil
}
