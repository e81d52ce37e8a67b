package integrity

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// evict takes members down: each is first marked DisruptionTarget (reason
// GangRestartByLockstep, or PreemptionByScheduler when finishing a
// preemption), so a Job's podFailurePolicy can tell a gang restart from a
// real failure, then deleted.
func (r *Reconciler) evict(ctx context.Context, pods []*corev1.Pod, reason, msg string) error {
	for _, p := range pods {
		cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
		var opts []client.DeleteOption
		// No kubelet will ever stop a member on a deleted node: mark it
		// Failed, as pod GC does for orphans, so the Job controller accounts
		// it (and drops its finalizer) at once, and remove it without a
		// grace period.
		gone := r.nodeGone(ctx, p.Spec.NodeName)
		if gone {
			opts = append(opts, client.GracePeriodSeconds(0))
		}
		if err := r.mark(ctx, p, cond, gone); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		uid := p.UID
		opts = append(opts, client.Preconditions{UID: &uid})
		if err := r.Client.Delete(ctx, p, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// mark sets cond (and, if failed, phase Failed) on a member, re-reading it
// on a write conflict: a member deleted unmarked would count against its
// Job's backoffLimit, and one on a deleted node would stay non-terminal —
// holding back its replacement — until pod GC finds it.
func (r *Reconciler) mark(ctx context.Context, p *corev1.Pod, cond corev1.PodCondition, failed bool) error {
	cp := p.DeepCopy()
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if cp == nil {
			cp = &corev1.Pod{}
			if err := r.Client.Get(ctx, client.ObjectKeyFromObject(p), cp); err != nil {
				return err
			}
			if cp.UID != p.UID {
				return apierrors.NewNotFound(corev1.Resource("pods"), p.Name)
			}
		}
		podgroup.SetPodCondition(cp, cond)
		if failed && cp.Status.Phase != corev1.PodSucceeded {
			cp.Status.Phase = corev1.PodFailed
		}
		err := r.Client.Status().Update(ctx, cp)
		if apierrors.IsConflict(err) {
			cp = nil // re-read
		}
		return err
	})
}

func (r *Reconciler) nodeGone(ctx context.Context, name string) bool {
	err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{})
	return apierrors.IsNotFound(err)
}
