package job

import (
	"context"
	"errors"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Releaser lets a namespace being deleted go when it holds Jobs that
// Lockstep's admission gave a per-index backoff. kube-controller-manager
// deletes a namespace's pods first and deletes nothing else while any
// remains; the Job controller keeps each index's last failed pod (its
// finalizer) until it has created that index's replacement, which a
// terminating namespace refuses — so the namespace would wait for ever.
// Deleting such a Job (its pods are being deleted anyway) makes the Job
// controller release its pods at once. Jobs the user made per-index are
// left to the user, as upstream leaves them.
type Releaser struct {
	Client client.Client
}

// Reconcile deletes, in a terminating namespace, the Jobs whose per-index
// backoff Lockstep set.
func (r *Releaser) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, req.NamespacedName, ns); err != nil || ns.DeletionTimestamp == nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(ns.Name)); err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.DeletionTimestamp != nil || !defaultedPerIndex(j) {
			continue
		}
		err := r.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(j.UID)})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
			continue
		}
		klog.FromContext(ctx).V(2).Info("Deleted a per-index Job in a terminating namespace, so its pods can go", "job", klog.KObj(j))
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// defaultedPerIndex reports whether Lockstep's admission set the Job's
// backoffLimitPerIndex.
func defaultedPerIndex(j *batchv1.Job) bool {
	for _, f := range strings.Split(j.Annotations[RestartBudgetDefaultedAnnotation], ",") {
		if f == PerIndexBackoff {
			return true
		}
	}
	return false
}

// SetupWithManager reconciles namespaces once they are being deleted.
func (r *Releaser) SetupWithManager(mgr ctrl.Manager) error {
	terminating := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return e.Object.GetDeletionTimestamp() != nil },
		UpdateFunc:  func(e event.UpdateEvent) bool { return e.ObjectNew.GetDeletionTimestamp() != nil },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("lockstep-namespace-release").
		For(&corev1.Namespace{}, builder.WithPredicates(terminating)).
		Complete(r)
}
