package jobintegration

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/podquota"
)

// ReasonQuotaExceeded is the event on a gang's PodGroup and its job when a
// ResourceQuota keeps the job's controller from creating the gang's pods.
const ReasonQuotaExceeded = lockv1.PodCreationReasonQuotaExceeded

// QuotaReconciler says why a gang waits for pods when a ResourceQuota is
// the reason: the job's controller (the Job controller, a JobSet's Jobs, an
// operator) is refused each pod it creates, and the scheduler, which sees
// only the pods that exist, can say no more than "waiting for pods". While
// a gang whose job runs has fewer than minCount members and a quota of its
// namespace has no room for one more of the missing pods — counted as the
// API server's quota admission counts them, from the quotas and the pods
// that exist (podquota) — its PodGroup carries PodCreationBlocked
// (reason QuotaExceeded) naming the quota, the resource, what is used, what
// a pod requests and the hard limit that would let the gang start; a
// warning event on the group and the job says the same when it is set or
// changes. The condition is removed once that is no longer so. A gang
// that has its pods, or whose pods no quota stands in the way of, is never
// written to.
type QuotaReconciler struct {
	Client       client.Client
	Recorder     record.EventRecorder
	Integrations Set
	Clock        clock.Clock
}

// SetupWithManager watches the PodGroups jobs control, the creation and
// deletion of their members (the last look at a group is then one whose
// pods the cache has), and every ResourceQuota (a quota raised, or room
// freed by pods that ended, is a quota change: its status counts them).
func (r *QuotaReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("gang-pod-quota").
		For(&lockv1.PodGroup{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return r.mayWait(o.(*lockv1.PodGroup))
		}))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(groupOfPod), builder.WithPredicates(predicate.Funcs{
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Watches(&corev1.ResourceQuota{}, handler.EnqueueRequestsFromMapFunc(r.groupsOfQuota)).
		Complete(r)
}

// groupOfPod maps a pod to the group it names.
func groupOfPod(_ context.Context, o client.Object) []reconcile.Request {
	p, ok := o.(*corev1.Pod)
	if !ok || podgroup.GroupOf(p) == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: podgroup.GroupOf(p)}}}
}

// mayWait reports whether pg is a job's gang that may be waiting for pods:
// its incarnation is not running, or it says it is blocked.
func (r *QuotaReconciler) mayWait(pg *lockv1.PodGroup) bool {
	ref := metav1.GetControllerOf(pg)
	if ref == nil || r.Integrations.ForKind(ref.APIVersion, ref.Kind) == nil || !podgroup.IsGang(pg) {
		return false
	}
	return meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodCreationBlocked) != nil ||
		!meta.IsStatusConditionTrue(pg.Status.Conditions, lockv1.Running)
}

// groupsOfQuota maps a quota to the gangs of its namespace that may wait.
func (r *QuotaReconciler) groupsOfQuota(ctx context.Context, o client.Object) []reconcile.Request {
	list := &lockv1.PodGroupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the PodGroups of a quota's namespace", "namespace", o.GetNamespace())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if pg := &list.Items[i]; r.mayWait(pg) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pg)})
		}
	}
	return out
}

// Reconcile judges one gang and writes the condition when its meaning
// changed.
func (r *QuotaReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pg := &lockv1.PodGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, pg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pg.DeletionTimestamp != nil || !r.mayWait(pg) {
		return ctrl.Result{}, nil
	}
	j, blocked, err := r.judge(ctx, pg)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.apply(ctx, pg, j, blocked)
}

// blocked is why a gang's pods cannot be created: the quota, and how many
// of its minCount are missing.
type blocked struct {
	*podquota.Exceeded
	missing, minCount int
}

// judge resolves the group's job and says whether a quota keeps its
// missing pods from being created (nil: no).
func (r *QuotaReconciler) judge(ctx context.Context, pg *lockv1.PodGroup) (GenericJob, *blocked, error) {
	j, g, err := r.jobOf(ctx, pg)
	if err != nil || j == nil {
		return nil, nil, err
	}
	if why, _, _ := j.Stopped(); why != "" || meta.IsStatusConditionTrue(pg.Status.Conditions, lockv1.Running) {
		return j, nil, nil
	}
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(pg.Namespace)); err != nil {
		return nil, nil, err
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	u := podgroup.Resolve(pg, pg.Namespace, pg.Name, pods, nil)
	if len(u.Members) >= u.MinCount() {
		return j, nil, nil
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := r.Client.List(ctx, quotas, client.InNamespace(pg.Namespace)); err != nil || len(quotas.Items) == 0 {
		return j, nil, err
	}
	checker := podquota.New(r.Clock)
	for _, pod := range missingLike(j, g, u.Members) {
		e, err := checker.Room(quotas.Items, pods, pod)
		if err != nil {
			return nil, nil, err
		}
		if e != nil {
			return j, &blocked{Exceeded: e, missing: u.MinCount() - len(u.Members), minCount: u.MinCount()}, nil
		}
	}
	return j, nil, nil
}

// jobOf is the job controlling pg and its group of pg's name; nil when no
// integration's job controls it (or no longer wants it).
func (r *QuotaReconciler) jobOf(ctx context.Context, pg *lockv1.PodGroup) (GenericJob, *Group, error) {
	ref := metav1.GetControllerOf(pg)
	if ref == nil {
		return nil, nil, nil
	}
	integ := r.Integrations.ForKind(ref.APIVersion, ref.Kind)
	if integ == nil {
		return nil, nil, nil
	}
	obj := integ.NewObject()
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: ref.Name}, obj); err != nil || obj.GetUID() != ref.UID {
		return nil, nil, client.IgnoreNotFound(err)
	}
	j := integ.Wrap(obj)
	c := r.Integrations.Classify(j)
	for i := range c.Groups {
		if c.Groups[i].Name == pg.Name {
			return j, &c.Groups[i], nil
		}
	}
	return nil, nil, nil
}

// missingLike are pods like the ones the group misses, one per role of the
// group that lacks pods: a member of that role as admitted (defaults and
// all), else one made from the role's template.
func missingLike(j GenericJob, g *Group, members []*corev1.Pod) []*corev1.Pod {
	_, perPod := j.(PodGrouper)
	var out []*corev1.Pod
	for _, role := range j.Roles() {
		if !slices.Contains(g.Roles, role.Name) {
			continue
		}
		var like *corev1.Pod
		have := int32(0)
		for _, m := range members {
			if j.RoleOf(m) == role.Name {
				have++
				like = m
			}
		}
		if !perPod && have >= role.Count {
			continue // none of this role is missing
		}
		if like == nil {
			like = &corev1.Pod{ObjectMeta: *role.Template.ObjectMeta.DeepCopy(), Spec: *role.Template.Spec.DeepCopy()}
			like.Namespace = j.Object().GetNamespace()
		}
		out = append(out, like)
	}
	return out
}

// apply writes PodCreationBlocked when its meaning changed: set with the
// quota's message (and an event on the group and the job), or removed.
func (r *QuotaReconciler) apply(ctx context.Context, pg *lockv1.PodGroup, j GenericJob, b *blocked) error {
	cur := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodCreationBlocked)
	if b == nil {
		if cur == nil {
			return nil
		}
		next := pg.DeepCopy()
		meta.RemoveStatusCondition(&next.Status.Conditions, lockv1.PodCreationBlocked)
		ctrl.LoggerFrom(ctx).V(1).Info("Gang's pods no longer blocked by a quota", "podGroup", klog.KObj(pg))
		return client.IgnoreNotFound(r.Client.Status().Update(ctx, next))
	}
	msg := quotaMessage(j, b)
	if cur != nil && cur.Message == msg {
		return nil
	}
	next := pg.DeepCopy()
	meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
		Type: lockv1.PodCreationBlocked, Status: metav1.ConditionTrue, Reason: lockv1.PodCreationReasonQuotaExceeded,
		Message: msg, ObservedGeneration: pg.Generation,
	})
	if err := r.Client.Status().Update(ctx, next); err != nil {
		return client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Gang's pods blocked by a quota", "podGroup", klog.KObj(pg), "quota", b.Quota, "resource", b.Resource)
	r.Recorder.Event(pg, corev1.EventTypeWarning, ReasonQuotaExceeded, msg)
	r.Recorder.Event(j.Object(), corev1.EventTypeWarning, ReasonQuotaExceeded, msg)
	return nil
}

// quotaMessage says which quota keeps the gang's pods from being created,
// and the fix.
func quotaMessage(j GenericJob, b *blocked) string {
	needed := b.Needed(b.missing)
	return fmt.Sprintf("%d of minCount %d pods do not exist: %s %s's pods cannot be created, ResourceQuota %s has no room for another (%s: %s used of %s, a pod requests %s); raise the quota's spec.hard[%s] to at least %s, or end pods it counts, and the gang is created and placed whole",
		b.missing, b.minCount, j.GVK().Kind, j.Object().GetName(), b.Quota, b.Resource, b.Used.String(), b.Hard.String(), b.Requested.String(), b.Resource, needed.String())
}
