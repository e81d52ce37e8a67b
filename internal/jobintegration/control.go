package jobintegration

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// A job's Workload and PodGroups are named after it, so an object of such a
// name can exist before the job does: a user's PodGroup created by hand,
// the group of another kind's job of the same name, or an earlier job's
// of that name that the garbage collector has not deleted yet. Lockstep
// never adopts one: a job's gang is only a group the job controls (its
// controller reference, set at creation), so no pod the job did not create
// is ever in its gang and the group goes with the job. A name taken by an
// object the job does not control is left alone and said so, with the fix,
// on the job and on that object; its pods do not join it (the webhook
// marks them with lockv1.GangOfAnnotation and podgroup.Admits refuses them),
// and the job's group is created once the name is free (the creation and
// deletion of every PodGroup and Workload is watched for the jobs that
// want its name).

// control is what ensure found of an object a job wants.
type control int

const (
	// created now, controlled by the job.
	controlCreated control = iota
	// existed, controlled by the job (updated if it had to be).
	controlOwned
	// exists and the job does not control it: left alone.
	controlTaken
)

// ensure creates want (controlled by j) when no object of its name exists,
// lets update adjust one that j controls, and leaves one that j does not
// control alone, saying so (notControlled).
func (r *Reconciler) ensure(ctx context.Context, j GenericJob, want client.Object, update func(client.Object) bool) (control, error) {
	existing := want.DeepCopyObject().(client.Object)
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), existing)
	if apierrors.IsNotFound(err) {
		err = r.Client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			// Created meanwhile: its creation is watched, and judged then.
			return controlTaken, nil
		}
		return controlCreated, err
	}
	if err != nil {
		return controlTaken, err
	}
	if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != j.Object().GetUID() {
		r.notControlled(ctx, j, existing, ref)
		return controlTaken, nil
	}
	if update(existing) {
		return controlOwned, r.Client.Update(ctx, existing)
	}
	return controlOwned, nil
}

// notControlled says, on the job and on the object, why the object of a
// name the job wants is not the job's and what to do.
func (r *Reconciler) notControlled(ctx context.Context, j GenericJob, o client.Object, ref *metav1.OwnerReference) {
	job, gvk := j.Object(), j.GVK()
	what := "Workload"
	switch o.(type) {
	case *lockv1.PodGroup:
		what = "PodGroup"
	case *lockv1.CompositePodGroup:
		what = "CompositePodGroup"
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Object of a name the job wants is not the job's: left alone", "kind", gvk.Kind, "object", what+" "+o.GetName(), "controller", ref)
	if ref != nil && ref.Kind == gvk.Kind && ref.APIVersion == gvk.GroupVersion().String() && ref.Name == job.GetName() {
		// An earlier job of this name: the garbage collector deletes the
		// object with it, and the deletion brings this job's.
		r.Recorder.Eventf(job, corev1.EventTypeNormal, ReasonNotControlled,
			"%s %s belongs to an earlier %s %s (uid %s) and is deleted with it; this %s's is created then", what, o.GetName(), gvk.Kind, ref.Name, ref.UID, gvk.Kind)
		return
	}
	why := "it has no controller (it was created before the " + gvk.Kind + ", by hand or by another tool)"
	fix := fmt.Sprintf("delete %s %s and Lockstep creates the %s's own", what, o.GetName(), gvk.Kind)
	if ref != nil {
		why = fmt.Sprintf("it is controlled by %s %s", ref.Kind, ref.Name)
		fix = fmt.Sprintf("give the %s or %s %s another name", gvk.Kind, ref.Kind, ref.Name)
	}
	if what == "PodGroup" && ref == nil {
		fix += "; to keep a group of your own, give it another name and set the label " + lockv1.PodGroupLabel + ": <its name> on the pod template"
	}
	r.Recorder.Eventf(job, corev1.EventTypeWarning, ReasonNotControlled,
		"%s %s is not this %s's: %s. Lockstep does not use it for the %s and its pods do not join it; the %s waits: %s",
		what, o.GetName(), gvk.Kind, why, gvk.Kind, gvk.Kind, fix)
	r.Recorder.Eventf(o, corev1.EventTypeWarning, ReasonNotControlled,
		"%s %s wants a %s of this name, but %s does not control this one: %s. Lockstep does not use it for the %s and its pods do not join it; %s",
		gvk.Kind, job.GetName(), what, gvk.Kind, why, gvk.Kind, fix)
}

// indexWanted indexes an integration's jobs by the names of the Workload
// and PodGroups they want.
const indexWanted = "lockstep.wantedNames"

// wanted are the names of the Workload and PodGroups a gang job wants.
func (r *Reconciler) wanted(o client.Object) []string {
	c := r.Integrations.Classify(r.Integration.Wrap(o))
	if c.Class != ClassGang {
		return nil
	}
	names := []string{o.GetName()}
	for _, g := range c.Groups {
		if g.Name != o.GetName() {
			names = append(names, g.Name)
		}
	}
	return names
}

// wanting maps a PodGroup or Workload to the jobs of the integration that
// want its name (it was created, deleted or its owners changed).
func (r *Reconciler) wanting(ctx context.Context, o client.Object) []reconcile.Request {
	gvk := r.Integration.GVK()
	obj, err := r.Client.Scheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "No list type for the integration's kind", "kind", gvk)
		return nil
	}
	list := obj.(client.ObjectList)
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexWanted: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the jobs that want a name", "kind", gvk, "name", o.GetName())
		return nil
	}
	var out []reconcile.Request
	_ = meta.EachListItem(list, func(item runtime.Object) error {
		if m, ok := item.(metav1.Object); ok {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: m.GetNamespace(), Name: m.GetName()}})
		}
		return nil
	})
	return out
}
