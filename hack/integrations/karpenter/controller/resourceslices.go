package main

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	drav1alpha1 "sigs.k8s.io/karpenter/dra-kwok-driver/pkg/apis/v1alpha1"
	drakwok "sigs.k8s.io/karpenter/dra-kwok-driver/pkg/controllers"
)

// registerResourceSlices runs the dra-kwok-driver's ResourceSlice
// controller on mgr: one reconcile of every node and DRAConfig (its
// Reconcile), queued under one key whenever a Node appears, goes or changes
// its labels or annotations, or a DRAConfig changes, and every 30 s as the
// driver asks.
func registerResourceSlices(mgr manager.Manager) error {
	slices := drakwok.NewResourceSliceController(mgr.GetClient())
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("dra-kwok.resourceslice").
		Watches(&corev1.Node{}, all, builder.WithPredicates(nodeMetadataChanged)).
		Watches(&drav1alpha1.DRAConfig{}, all).
		Complete(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			res, err := slices.Reconcile(ctx)
			return reconcile.Result{RequeueAfter: res.RequeueAfter}, err
		}))
}

// nodeMetadataChanged passes a Node's creation and deletion and the updates
// that change what selects it (labels, the kwok annotation), not its
// heartbeats.
var nodeMetadataChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
			!maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations())
	},
}
