package jobintegration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// TemplateName is the name of the one pod group template of a job's Workload.
const TemplateName = "workers"

// RootTemplateName is the name of the composite pod group template of a
// job whose gang is a tree (its children's templates are its roles').
const RootTemplateName = "job"

// Event reasons on the job (and, for a group it does not control, on that
// group too).
const (
	ReasonGangCreated      = "GangCreated"
	ReasonNotGangScheduled = "NotGangScheduled"
	ReasonInTreeGang       = "InTreeGangPolicy"
	ReasonGangRemoved      = "GangRemoved"
	ReasonGroupNamed       = "PodGroupNamedByTemplate"
	ReasonNotControlled    = "NotControlled"
	// ReasonCompositesNotServed: the job needs a tree and the
	// CompositePodGroup CRD is not installed.
	ReasonCompositesNotServed = "CompositePodGroupNotServed"
)

// Reconciler makes every qualifying job of one integration gangs.
type Reconciler struct {
	Client      client.Client
	Recorder    record.EventRecorder
	Integration Integration
	// Integrations are all integrations Lockstep runs: a job another one
	// controls (a JobSet's Jobs) is part of that one's gang.
	Integrations Set
	// WithoutComposites: the API server does not serve CompositePodGroups
	// (an upgrade left their CRD out). The reconciler neither watches nor
	// creates them, and a job whose roles make a tree gets no gang but a
	// warning event saying why (the process restarts once the CRD is
	// installed: apidiscovery.RestartWhenServed).
	WithoutComposites bool
}

// SetupWithManager watches the integration's jobs (creation, spec and
// annotation changes only: status churn does not re-run it), the
// PodGroups, Workloads and CompositePodGroups they own, so a deleted group
// is recreated, and the creation and deletion of any of those of a name a
// job wants, so a job whose group name was taken gets its group once it is
// free.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), r.Integration.NewObject(), indexWanted, r.wanted); err != nil {
		return err
	}
	taken := builder.WithPredicates(predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("jobintegration-"+r.Integration.Name()).
		For(r.Integration.NewObject(), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&lockv1.PodGroup{}).
		Owns(&lockv1.Workload{}).
		Watches(&lockv1.PodGroup{}, handler.EnqueueRequestsFromMapFunc(r.wanting), taken).
		Watches(&lockv1.Workload{}, handler.EnqueueRequestsFromMapFunc(r.wanting), taken)
	if !r.WithoutComposites {
		b = b.Owns(&lockv1.CompositePodGroup{}).
			Watches(&lockv1.CompositePodGroup{}, handler.EnqueueRequestsFromMapFunc(r.wanting), taken)
	}
	return b.Complete(r)
}

// Reconcile ensures the job's Workload and PodGroups: created and
// controlled by the job, never one of the job's names that it does not
// control (see control.go).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := ctrl.LoggerFrom(ctx)
	obj := r.Integration.NewObject()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	j := r.Integration.Wrap(obj)
	kind := j.GVK().Kind
	c := r.Integrations.Classify(j)
	switch c.Class {
	case ClassNotLockstep, ClassChild:
		return ctrl.Result{}, nil
	case ClassInTree:
		r.Recorder.Event(obj, corev1.EventTypeNormal, ReasonInTreeGang,
			"the "+kind+"'s gang policy for the API server's scheduling.k8s.io PodGroup is used: Lockstep schedules the PodGroup its controller creates and creates none of its own")
		return ctrl.Result{}, nil
	case ClassNamed:
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, ReasonGroupNamed,
			"%s: Lockstep schedules its pods as that PodGroup says and creates none of its own", c.Why.Condition)
		return ctrl.Result{}, nil
	case ClassNotQualified:
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, ReasonNotGangScheduled, "not a gang, its pods are scheduled one by one: %v", c.Why)
		return ctrl.Result{}, nil
	}
	pgs, root, wl := desired(j, c.Groups, c.Mode)
	if root != nil && r.WithoutComposites {
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, ReasonCompositesNotServed,
			"the %s's roles make a scheduling tree, but the API server does not serve CompositePodGroups (%s): no gang is created and its pods wait; apply the CRDs of this Lockstep release (the chart's crds/, which `helm upgrade` does not apply) — the controllers restart by themselves once they are served",
			kind, lockv1.GroupVersion.String())
		return ctrl.Result{}, nil
	}
	got, err := r.ensure(ctx, j, wl, func(client.Object) bool { return false })
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("workload: %w", err)
	}
	if got == controlTaken {
		// Without its Workload the job gets no group: they would point
		// at another's.
		return ctrl.Result{}, nil
	}
	var created []string
	if root != nil {
		// Its spec is immutable: the tree's shape is fixed at creation.
		got, err := r.ensure(ctx, j, root, func(client.Object) bool { return false })
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("compositepodgroup %s: %w", root.Name, err)
		}
		if got == controlTaken {
			// Its children would hang under another's tree.
			return ctrl.Result{}, nil
		}
		if got == controlCreated {
			created = append(created, fmt.Sprintf("CompositePodGroup %s (gang of all %d groups)", root.Name, root.Spec.SchedulingPolicy.Gang.MinGroupCount))
		}
	}
	for _, pg := range pgs {
		got, err := r.ensure(ctx, j, pg, func(existing client.Object) bool {
			cur := existing.(*lockv1.PodGroup)
			if cur.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang == nil || cur.Spec.SchedulingPolicy.Gang.MinCount == pg.Spec.SchedulingPolicy.Gang.MinCount {
				return false
			}
			// minCount follows the job (parallelism and the min-count
			// annotation can change); it is the one mutable policy field. The
			// members that stay are never restarted by a resize.
			cur.Spec.SchedulingPolicy.Gang.MinCount = pg.Spec.SchedulingPolicy.Gang.MinCount
			return true
		})
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("podgroup %s: %w", pg.Name, err)
		}
		if got == controlCreated {
			created = append(created, "PodGroup "+pg.Name+" ("+policyText(pg.Spec.SchedulingPolicy)+")")
		}
	}
	if len(created) > 0 {
		logger.V(1).Info("Job became gangs", "kind", kind, "groups", created)
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, ReasonGangCreated, "created %s and Workload %s", strings.Join(created, ", "), wl.Name)
	}
	if _, ok := j.(PodGrouper); !ok {
		// One group per role, or one of the job: its groups never go.
		return ctrl.Result{}, nil
	}
	wait, err := r.prune(ctx, obj, pgs)
	return ctrl.Result{RequeueAfter: wait}, err
}

// pruneRecheck is how soon a group removed from its job is looked at again
// while pods of it remain.
const pruneRecheck = 5 * time.Second

// policyText is how the GangCreated event names a group's policy.
func policyText(p lockv1.PodGroupSchedulingPolicy) string {
	if p.Gang == nil {
		return "basic: no minimum"
	}
	return fmt.Sprintf("gang, minCount %d", p.Gang.MinCount)
}

// prune deletes the PodGroups the job controls but no longer has (a
// LeaderWorkerSet's groups above its new replicas after a scale-down) once
// none of their pods is left that is not finished; while some are, it
// looks again shortly. It returns how soon (0: nothing left to prune).
func (r *Reconciler) prune(ctx context.Context, obj client.Object, want []*lockv1.PodGroup) (time.Duration, error) {
	list := &lockv1.PodGroupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return 0, err
	}
	keep := map[string]bool{}
	for _, pg := range want {
		keep[pg.Name] = true
	}
	var wait time.Duration
	for i := range list.Items {
		pg := &list.Items[i]
		ref := metav1.GetControllerOf(pg)
		if keep[pg.Name] || ref == nil || ref.UID != obj.GetUID() || pg.DeletionTimestamp != nil {
			continue
		}
		pods := &corev1.PodList{}
		if err := r.Client.List(ctx, pods, client.InNamespace(pg.Namespace), client.MatchingLabels{lockv1.PodGroupLabel: pg.Name}); err != nil {
			return 0, err
		}
		if slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return !podgroup.Terminal(&p) }) {
			wait = pruneRecheck
			continue
		}
		uid := pg.UID
		if err := r.Client.Delete(ctx, pg, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, err
		}
		ctrl.LoggerFrom(ctx).V(1).Info("PodGroup of a group the job no longer has deleted", "podGroup", pg.Name)
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, ReasonGangRemoved, "deleted PodGroup %s: the %s no longer has that group and none of its pods is left", pg.Name, ref.Kind)
	}
	return wait, nil
}

// desired computes the Workload, the root CompositePodGroup (nil unless
// the job is a tree) and the PodGroups of a job, all owned by it: one
// Workload named after the job with a pod group template per group, or
// for a tree one composite template holding them.
func desired(j GenericJob, groups []Group, mode *lockv1.DisruptionMode) ([]*lockv1.PodGroup, *lockv1.CompositePodGroup, *lockv1.Workload) {
	obj := j.Object()
	gvk := j.GVK()
	owner := metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: obj.GetName(), UID: obj.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: name, OwnerReferences: []metav1.OwnerReference{owner}}
	}
	wl := &lockv1.Workload{
		ObjectMeta: meta(obj.GetName()),
		Spec:       lockv1.WorkloadSpec{ControllerRef: &lockv1.TypedLocalObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: obj.GetName()}},
	}
	var pgs []*lockv1.PodGroup
	var templates []lockv1.PodGroupTemplate
	seen := map[string]bool{}
	for _, g := range groups {
		policy := groupPolicy(g)
		if !seen[g.Template] {
			// Groups of one template (a LeaderWorkerSet's replicas) share it.
			seen[g.Template] = true
			t := lockv1.PodGroupTemplate{
				Name: g.Template, SchedulingPolicy: policy, DisruptionMode: mode.DeepCopy(), PriorityClassName: g.PriorityClassName,
			}
			g.Topology.apply(&t.SchedulingConstraints, nil)
			templates = append(templates, t)
		}
		pg := &lockv1.PodGroup{
			ObjectMeta: meta(g.Name),
			Spec: lockv1.PodGroupSpec{
				WorkloadRef:       &lockv1.WorkloadReference{WorkloadName: wl.Name, TemplateName: g.Template},
				SchedulingPolicy:  *policy.DeepCopy(),
				DisruptionMode:    mode.DeepCopy(),
				PriorityClassName: g.PriorityClassName,
			},
		}
		if g.Parent != nil {
			pg.Spec.ParentCompositePodGroupName = ptr.To(g.Parent.Name)
		}
		g.Topology.apply(&pg.Spec.SchedulingConstraints, &pg.Annotations)
		pgs = append(pgs, pg)
	}
	if len(groups) == 0 || groups[0].Parent == nil {
		wl.Spec.PodGroupTemplates = templates
		return pgs, nil, wl
	}
	root := desiredRoot(groups[0], mode, wl.Name, meta(groups[0].Parent.Name))
	t := lockv1.CompositePodGroupTemplate{
		Name: root.Spec.WorkloadRef.TemplateName, SchedulingPolicy: root.Spec.SchedulingPolicy, SchedulingConstraints: root.Spec.SchedulingConstraints.DeepCopy(),
		DisruptionMode: mode.DeepCopy(), PriorityClassName: root.Spec.PriorityClassName, PodGroupTemplates: templates,
	}
	wl.Spec.CompositePodGroupTemplates = []lockv1.CompositePodGroupTemplate{t}
	return pgs, root, wl
}

// groupPolicy is a group's gang of MinCount, or basic when it has no
// minimum (a role of a tree).
func groupPolicy(g Group) lockv1.PodGroupSchedulingPolicy {
	if g.MinCount == 0 {
		return lockv1.PodGroupSchedulingPolicy{Basic: &lockv1.BasicSchedulingPolicy{}}
	}
	return lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: g.MinCount}}
}

// desiredRoot is the root CompositePodGroup of a tree whose child g is:
// a gang of every child, in the job's required topology.
func desiredRoot(g Group, mode *lockv1.DisruptionMode, workload string, meta metav1.ObjectMeta) *lockv1.CompositePodGroup {
	c := &lockv1.CompositePodGroup{
		ObjectMeta: meta,
		Spec: lockv1.CompositePodGroupSpec{
			WorkloadRef:       &lockv1.WorkloadReference{WorkloadName: workload, TemplateName: RootTemplateName},
			SchedulingPolicy:  lockv1.CompositePodGroupSchedulingPolicy{Gang: &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: g.Parent.MinGroupCount}},
			DisruptionMode:    mode.DeepCopy(),
			PriorityClassName: g.PriorityClassName,
		},
	}
	// The root is what a tree is evicted with: it carries the job's terms.
	Topology{Required: g.Parent.Required, Terms: g.Topology.Terms}.apply(&c.Spec.SchedulingConstraints, &c.Annotations)
	return c
}
