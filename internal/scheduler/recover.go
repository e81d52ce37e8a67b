package scheduler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// recover releases device allocations left behind by a crash: claims that
// are allocated and reserved only for Lockstep pods that are not bound, when
// no member of those pods' group is bound. Claims of a group that is partly
// bound are kept so the rest binds where its devices already are.
func (s *Scheduler) recover(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	claims, err := s.listers.claims.List(labels.Everything())
	if err != nil {
		return err
	}
	released := 0
	for _, c := range claims {
		if owner := dra.ExtendedClaimOwner(c); owner != "" {
			// Created for an attempt that did not bind its pod: the next
			// attempt creates its own, so this one only holds devices.
			if c.Status.Allocation != nil && !s.ownerBound(c, owner) {
				key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
				logger.Info("Deleting an extended-resource claim allocated for a pod that was never bound", "claim", key)
				if err := s.binder.deleteClaim(ctx, key); err != nil {
					return err
				}
				released++
			}
			continue
		}
		if c.Status.Allocation == nil || len(c.Status.ReservedFor) == 0 {
			continue
		}
		orphan := true
		drop := map[types.UID]bool{}
		for _, r := range c.Status.ReservedFor {
			p, err := s.listers.pods.Pods(c.Namespace).Get(r.Name)
			if err != nil || p.UID != r.UID || !podgroup.Ours(p) || !podgroup.Pending(p) || s.groupPartlyBound(p) {
				orphan = false
				break
			}
			drop[r.UID] = true
		}
		if !orphan {
			continue
		}
		key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
		logger.Info("Releasing a claim allocated for pods that were never bound", "claim", key)
		if err := releaseClaim(ctx, s.client, key, drop, true); err != nil {
			return err
		}
		released++
	}
	logger.V(1).Info("Start-up recovery done", "releasedClaims", released)
	return nil
}

// ownerBound reports whether the pod an extended-resource claim was created
// for exists, is bound, or is not Lockstep's (kube-scheduler's claims are
// kube-scheduler's business).
func (s *Scheduler) ownerBound(c *resourcev1.ResourceClaim, owner types.UID) bool {
	for _, o := range c.OwnerReferences {
		if o.UID != owner {
			continue
		}
		p, err := s.listers.pods.Pods(c.Namespace).Get(o.Name)
		if err != nil || p.UID != owner {
			return false // gone: garbage collection deletes the claim too
		}
		return !podgroup.Ours(p) || !podgroup.Pending(p)
	}
	return true
}

// groupPartlyBound reports whether another member of the pod's group holds a node.
func (s *Scheduler) groupPartlyBound(p *corev1.Pod) bool {
	g := podgroup.GroupOf(p)
	if g == "" {
		return false
	}
	objs, err := s.listers.podIndex.ByIndex(groupIndex, p.Namespace+"/"+g)
	if err != nil {
		return false
	}
	for _, o := range objs {
		if m := o.(*corev1.Pod); podgroup.Ours(m) && podgroup.Active(m) {
			return true
		}
	}
	return false
}
