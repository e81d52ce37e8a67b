package jobintegration

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// IndexWanted, Wanted and Wanting expose the watch of names a job wants.
const IndexWanted = indexWanted

func (r *Reconciler) Wanted(o client.Object) []string { return r.wanted(o) }

func (r *Reconciler) Wanting(ctx context.Context, o client.Object) []reconcile.Request {
	return r.wanting(ctx, o)
}

func (r *QuotaReconciler) GroupsOfQuota(ctx context.Context, o client.Object) []reconcile.Request {
	return r.groupsOfQuota(ctx, o)
}
