package integrity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/scheduler"
)

// restart evicts the remaining members — each first marked DisruptionTarget,
// so Job podFailurePolicy can tell a gang restart from a real failure — and
// records why on the PodGroup.
func (r *Reconciler) restart(ctx context.Context, pg *lockv1.PodGroup, g gang) error {
	logger := ctrl.LoggerFrom(ctx)
	msg := fmt.Sprintf("%s: restarting the whole gang (disruptionMode all), evicting %d running members", g.detail, len(g.bound))
	logger.Info("Gang lost a member; restarting it whole", "podGroup", client.ObjectKeyFromObject(pg), "reason", g.reason, "detail", g.detail)
	r.endIncarnation(g.gone...)
	for _, p := range g.bound {
		cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: PodReason,
			Message: fmt.Sprintf("PodGroup %s lost a member (%s); the gang restarts whole", pg.Name, g.detail), LastTransitionTime: metav1.Now()}
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
		r.endIncarnation(p.UID)
		if err := r.Client.Delete(ctx, p, opts...); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	r.restarts.WithLabelValues(g.reason).Inc()
	r.Recorder.Event(pg, corev1.EventTypeWarning, "GangRestart", msg)
	cur := pg.DeepCopy()
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
		Type: lockv1.DisruptionTarget, Status: metav1.ConditionTrue, Reason: g.reason, Message: msg, ObservedGeneration: pg.Generation,
	})
	return client.IgnoreNotFound(r.Client.Status().Update(ctx, cur))
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
		scheduler.SetPodCondition(cp, cond)
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
