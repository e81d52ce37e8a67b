package workload

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
)

// roleKinds are, by "apiVersion/kind", the integrations whose roles may
// keep their own minimums — a Ray cluster's head and worker groups, an
// elastic Kubeflow job's replica types, an MPIJob's launcher and workers —
// so that Lockstep schedules them as a tree (a root CompositePodGroup over
// one PodGroup per role). Their jobs are built from their roles
// (rolesJob).
var roleKinds = func() map[string]jobintegration.Integration {
	out := map[string]jobintegration.Integration{}
	for _, integ := range integrations.All() {
		j := integ.Wrap(integ.NewObject())
		if _, ok := j.(jobintegration.RoleMinCounter); !ok {
			continue
		}
		if _, ok := j.(jobintegration.PodGrouper); ok {
			continue
		}
		out[integ.GVK().GroupVersion().String()+"/"+integ.GVK().Kind] = integ
	}
	return out
}()

// rolesJob builds a job of one of roleKinds: each role's pods as its
// controller first creates them (Count of its template, named
// <job>-<role>-<i>; an MPIJob's launcher with them, scheduled alone), and
// its gangs as Lockstep's integration makes them — a tree when its roles
// keep their own minimums.
func (b *builder) rolesJob(integ jobintegration.Integration, obj client.Object) (*Job, field.ErrorList) {
	obj = obj.DeepCopyObject().(client.Object)
	obj.SetNamespace(b.nsOr(obj.GetNamespace()))
	gvk := integ.GVK()
	uid := types.UID(strings.ToLower(gvk.Kind) + "-" + obj.GetNamespace() + "-" + obj.GetName())
	obj.SetUID(uid)
	j := integ.Wrap(obj)
	var errs field.ErrorList
	switch why, _, suspended := j.Stopped(); {
	case suspended && b.opts.Live:
		errs = append(errs, b.suspended(field.NewPath("spec"), gvk.Kind+" "+obj.GetNamespace()+"/"+obj.GetName())...)
	case suspended || why != "":
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf("a %s that is %s never runs: remove it from the workload, or start it", gvk.Kind, why)))
	}
	roles := j.Roles()
	if len(roles) == 0 {
		errs = append(errs, field.Required(field.NewPath("spec"), "a "+gvk.Kind+" runs the pods of its roles: it has none"))
		return nil, errs
	}
	prios := make([]int32, len(roles))
	for i, r := range roles {
		errs = append(errs, b.checkTemplate(r.Template, r.Path)...)
		b.ours(&r.Template.Spec)
		p, perrs := b.priority(&r.Template.Spec, r.Path.Child("spec"))
		errs = append(errs, perrs...)
		prios[i] = p
	}
	arrival, runtime, terrs := b.timing(obj.GetAnnotations(), roles[0].Template.Annotations, roles[0].Path)
	errs = append(errs, terrs...)
	interval, ierrs := podInterval(obj.GetAnnotations())
	errs = append(errs, ierrs...)
	if len(errs) > 0 {
		return nil, errs
	}
	out := &Job{Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: uid, Arrival: arrival, Runtime: runtime, PodInterval: interval, Priority: prios[0], Template: roles[0].Path.String()}
	owner := ControllerRef(gvk.GroupVersion().String(), gvk.Kind, obj.GetName(), uid)
	var role []string
	for i, r := range roles {
		out.Priority = min(out.Priority, prios[i])
		for n := int32(0); n < r.Count; n++ {
			name := fmt.Sprintf("%s-%s-%d", obj.GetName(), strings.ToLower(r.Name), n)
			out.Pods = append(out.Pods, podFrom(r.Template, out.Namespace, name, nil, owner, nil, prios[i]))
			if out.podSpec == nil {
				out.podSpec = map[string]*field.Path{}
			}
			out.podSpec[name] = r.Path.Child("spec")
			role = append(role, r.Name)
		}
	}
	return out, b.gangs(out, j, int32(len(out.Pods)), role)
}

// roleKindOf is the integration of a decoded object among roleKinds, nil
// if it is not one.
func roleKindOf(o any) (jobintegration.Integration, client.Object) {
	co, ok := o.(client.Object)
	if !ok {
		return nil, nil
	}
	gvk := co.GetObjectKind().GroupVersionKind()
	return roleKinds[gvk.GroupVersion().String()+"/"+gvk.Kind], co
}
