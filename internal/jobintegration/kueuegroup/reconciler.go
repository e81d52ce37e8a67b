package kueuegroup

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// indexGroup indexes pods by the Kueue group they joined.
const indexGroup = "lockstep.kueuePodGroup"

// indexValue is a pod's indexGroup value: the Kueue group it joined.
func indexValue(o client.Object) []string {
	if p := o.(*corev1.Pod); Joins(p) {
		return []string{Named(p)}
	}
	return nil
}

// Reconciler keeps one Lockstep PodGroup per Kueue pod group of Lockstep
// pods: created with its first member (a gang of the group's total count),
// its minCount following that count, owned by every member so it goes with
// the last. A PodGroup of that name that Lockstep did not make for the
// group (a user's) is never adopted or changed: the pods that name the
// group join it as it is — they chose its name — and an event on it says
// so. (One a job controls takes none of them: the webhook refuses them.)
type Reconciler struct {
	Client client.Client
	// Reader reads a member's StatefulSet, once per group, when its
	// PodGroup is created (no informer watches StatefulSets).
	Reader   client.Reader
	Recorder record.EventRecorder
}

// SetupWithManager watches pods (their creation, deletion and label or
// annotation changes: status churn does not reach it) and the PodGroups it
// made, so a deleted one is made again while its pods remain.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, indexGroup, indexValue); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("kueue-pod-groups").
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if p, ok := o.(*corev1.Pod); ok && Joins(p) {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: Named(p)}}}
			}
			return nil
		}), builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&lockv1.PodGroup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if pg, ok := o.(*lockv1.PodGroup); ok && Ours(pg) {
				return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(pg)}}
			}
			return nil
		})).
		Complete(r)
}

// Event reasons on the PodGroup.
const (
	ReasonGangCreated      = jobintegration.ReasonGangCreated
	ReasonNotGangScheduled = jobintegration.ReasonNotGangScheduled
	ReasonNotMade          = "NotMadeForKueueGroup"
)

// Reconcile ensures Kueue group req's PodGroup.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := ctrl.LoggerFrom(ctx)
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(req.Namespace), client.MatchingFields{indexGroup: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	shape, ok := ShapeOf(req.Name, pods)
	pg := &lockv1.PodGroup{}
	err := r.Client.Get(ctx, req.NamespacedName, pg)
	switch {
	case apierrors.IsNotFound(err):
		if !ok {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.create(ctx, req.Namespace, req.Name, shape, pods)
	case err != nil:
		return ctrl.Result{}, err
	case !Ours(pg) && pg.DeletionTimestamp == nil && ok:
		r.Recorder.Eventf(pg, corev1.EventTypeNormal, ReasonNotMade,
			"the pods of Kueue pod group %s join this PodGroup as it is: Lockstep did not make it for the group, so it neither changes it (its minCount stays, not %s) nor deletes it with the last pod; delete it to let Lockstep make the group's own",
			req.Name, TotalCountAnnotation)
		return ctrl.Result{}, nil
	case !Ours(pg) || pg.DeletionTimestamp != nil || !ok:
		// Going (its deletion is watched: it is made again once gone), or
		// no member left to read.
		return ctrl.Result{}, nil
	}
	changed := false
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil && g.MinCount != shape.MinCount {
		logger.V(1).Info("Kueue pod group resized", "podGroup", req.NamespacedName, "from", g.MinCount, "to", shape.MinCount)
		g.MinCount = shape.MinCount
		changed = true
	}
	for _, o := range shape.Owners {
		if !slices.ContainsFunc(pg.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == o.UID }) {
			pg.OwnerReferences = append(pg.OwnerReferences, o)
			changed = true
		}
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Client.Update(ctx, pg)
}

func (r *Reconciler) create(ctx context.Context, ns, name string, shape Shape, pods []*corev1.Pod) error {
	why, err := r.neverWhole(ctx, ns, shape, pods)
	if err != nil {
		return err
	}
	pg := PodGroup(ns, name, shape, why != "")
	if err := r.Client.Create(ctx, pg); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // the watch brings it back
		}
		return err
	}
	mode := "all"
	if shape.Mode.Single != nil {
		mode = "single"
	}
	if why != "" {
		ctrl.LoggerFrom(ctx).Info("Kueue pod group is not a gang: its pods are placed one by one", "podGroup", ns+"/"+name, "why", why)
		r.Recorder.Eventf(pg, corev1.EventTypeWarning, ReasonNotGangScheduled, "Kueue pod group %s is not a gang, its pods are placed one by one: %s", name, why)
		return nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Kueue pod group became a gang", "podGroup", ns+"/"+name, "minCount", shape.MinCount, "disruptionMode", mode)
	r.Recorder.Eventf(pg, corev1.EventTypeNormal, ReasonGangCreated, "gang of Kueue pod group %s: minCount %d (%s), disruption mode %s", name, shape.MinCount, TotalCountAnnotation, mode)
	return nil
}

// neverWhole says why a group can never be placed whole ("" if it can): its
// pods come from a StatefulSet that creates each only once the one before
// it is Ready.
func (r *Reconciler) neverWhole(ctx context.Context, ns string, shape Shape, pods []*corev1.Pod) (string, error) {
	if shape.MinCount < 2 {
		return "", nil
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "StatefulSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
			continue
		}
		sts := &appsv1.StatefulSet{}
		if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, sts); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return "", err
		}
		if sts.UID == ref.UID && OrderedReady(sts) {
			return fmt.Sprintf("StatefulSet %s creates its pods one at a time, each once the one before is Ready (podManagementPolicy OrderedReady), so its %d pods can never wait to be placed together; set podManagementPolicy: Parallel to make it a gang", sts.Name, shape.MinCount), nil
		}
		return "", nil
	}
	return "", nil
}
