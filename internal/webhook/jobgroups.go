package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
)

// A job whose pod template names a group (the membership label, or
// spec.schedulingGroup) has its pods join that group, and those pods skip
// the pod webhook when the Job controller creates them — the template is
// what is checked. A group another job's gang owns, or will own, never
// takes them (podgroup.Admits counts a job's gang only from its own pods),
// so they would stay pending without a word: that is refused here, and a
// group that does not exist yet is warned about.

// namedGroups checks the groups j's templates name besides its own gangs:
// refused when another job's gang has (or will have) that name, warned
// when no such PodGroup exists yet.
func (v *JobValidator) namedGroups(ctx context.Context, ns string, j jobintegration.GenericJob) (field.ErrorList, admission.Warnings, error) {
	obj, kind := j.Object(), j.GVK().Kind
	own := ownGroups(j)
	var errs field.ErrorList
	var warnings admission.Warnings
	var others []jobintegration.GenericJob
	listed := false
	for _, r := range j.Roles() {
		g, path := templateGroup(r)
		if g == "" || own.Has(g) {
			continue
		}
		pg, err := v.podGroup(ctx, ns, g)
		switch {
		case err == nil:
			if ref := metav1.GetControllerOf(pg); ref != nil && integrationSet.ForKind(ref.APIVersion, ref.Kind) != nil && ref.UID != obj.GetUID() {
				errs = append(errs, field.Forbidden(path, fmt.Sprintf(
					"PodGroup %s is the gang of %s %s: only its pods join it, so this %s's pods would wait for ever; remove the label to let Lockstep make the %s's own gang, or name a PodGroup you created for it",
					g, ref.Kind, ref.Name, kind, kind)))
			}
		case apierrors.IsNotFound(err):
			if !listed {
				if others, err = v.jobsIn(ctx, ns); err != nil {
					return nil, nil, err
				}
				listed = true
			}
			if o := gangNamed(others, g, obj.GetUID()); o != nil {
				errs = append(errs, field.Forbidden(path, fmt.Sprintf(
					"PodGroup %s will be the gang of %s %s (Lockstep creates it for that %s): only its pods join it, so this %s's pods would wait for ever; remove the label to let Lockstep make the %s's own gang, or name a PodGroup you created for it",
					g, o.GVK().Kind, o.Object().GetName(), o.GVK().Kind, kind, kind)))
				continue
			}
			warnings = append(warnings, fmt.Sprintf("%s names PodGroup %s, which does not exist: the %s's pods wait, unscheduled, until it is created; create PodGroup %s, or remove the label to let Lockstep make the gang",
				path, g, kind, g))
		default:
			return nil, nil, apierrors.NewInternalError(err)
		}
	}
	return errs, warnings, nil
}

// labelledOnly checks a job whose templates name a group but not Lockstep
// as their scheduler: only the groups they name.
func (v *JobValidator) labelledOnly(ctx context.Context, j jobintegration.GenericJob) (admission.Warnings, error) {
	errs, warnings, err := v.namedGroups(ctx, namespaceOf(ctx, j.Object().GetNamespace()), j)
	if err != nil || len(errs) == 0 {
		return warnings, err
	}
	return warnings, apierrors.NewInvalid(j.GVK().GroupKind(), j.Object().GetName(), errs)
}

// namedByOthers warns, when a job is created, about other jobs whose
// templates name one of its gangs: their pods will never join it.
func (v *JobValidator) namedByOthers(ctx context.Context, ns string, j jobintegration.GenericJob) (admission.Warnings, error) {
	groups, ok := gangGroups(j)
	if !ok {
		return nil, nil
	}
	others, err := v.jobsIn(ctx, ns)
	if err != nil {
		return nil, err
	}
	var warnings admission.Warnings
	for _, g := range groups {
		for _, o := range others {
			if o.Object().GetUID() == j.Object().GetUID() || integrationSet.Parent(o.Object()) != nil {
				continue
			}
			for _, r := range o.Roles() {
				if named, path := templateGroup(r); named == g.Name {
					warnings = append(warnings, fmt.Sprintf("%s %s's %s names PodGroup %s, which will be this %s's gang: its pods never join another job's gang and will wait for ever; change that template's label, or give this %s another name",
						o.GVK().Kind, o.Object().GetName(), path, g.Name, j.GVK().Kind, j.GVK().Kind))
					break
				}
			}
		}
	}
	return warnings, nil
}

// ownGroups are the groups Lockstep makes (or made) for j: its gangs, and
// its name (a gang job's group before its shape is final).
func ownGroups(j jobintegration.GenericJob) sets.Set[string] {
	own := sets.New(j.Object().GetName())
	if groups, ok := gangGroups(j); ok {
		for _, g := range groups {
			own.Insert(g.Name)
		}
	}
	return own
}

// templateGroup is the group a role's template names and the field that
// names it: the membership label, else spec.schedulingGroup.
func templateGroup(r jobintegration.Role) (string, *field.Path) {
	if g := r.Template.Labels[lockv1.PodGroupLabel]; g != "" {
		return g, r.Path.Child("metadata", "labels").Key(lockv1.PodGroupLabel)
	}
	if sg := r.Template.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		return *sg.PodGroupName, r.Path.Child("spec", "schedulingGroup", "podGroupName")
	}
	return "", nil
}

// gangNamed is the job other than uid whose gang is named g, nil if none.
func gangNamed(jobs []jobintegration.GenericJob, g string, uid types.UID) jobintegration.GenericJob {
	for _, o := range jobs {
		if o.Object().GetUID() == uid {
			continue
		}
		groups, ok := gangGroups(o)
		if !ok {
			continue
		}
		for _, og := range groups {
			if og.Name == g {
				return o
			}
		}
	}
	return nil
}

// jobScheme knows every integration's list kind; never modified.
var jobScheme *runtime.Scheme = integrations.Scheme()

// jobsIn are the jobs of every integration in ns, from the cache; a kind
// the API server does not serve has none.
func (v *JobValidator) jobsIn(ctx context.Context, ns string) ([]jobintegration.GenericJob, error) {
	var out []jobintegration.GenericJob
	for _, integ := range integrationSet {
		gvk := integ.GVK()
		obj, err := jobScheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err != nil {
			return nil, err
		}
		list := obj.(client.ObjectList)
		if err := v.Cached.List(ctx, list, client.InNamespace(ns)); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			out = append(out, integ.Wrap(it.(client.Object)))
		}
	}
	return out, nil
}

// gangGroups are the groups Lockstep makes for j when it is a gang.
func gangGroups(j jobintegration.GenericJob) ([]jobintegration.Group, bool) {
	c := integrationSet.Classify(j)
	return c.Groups, c.Class == jobintegration.ClassGang
}
