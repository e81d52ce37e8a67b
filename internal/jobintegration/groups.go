package jobintegration

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Group is one PodGroup a job is made of.
type Group struct {
	// Name is the PodGroup's name (and the pods' membership label).
	Name string
	// Template is the Workload's pod group template the group comes from.
	Template string
	MinCount int32
	// Size is how many pods the group has when the job runs whole.
	Size int32
	// Roles are the roles whose pods join the group.
	Roles []string
	// PriorityClassName is the roles' pods' (one: a group's members have
	// one priority).
	PriorityClassName string
	// Topology is where the group must, and would rather, run.
	Topology Topology
}

// Groups are the gangs of a job that qualifies: one of every pod (named
// after the job), or with gang-scope "role" one per role (named
// <job>-<role>); the error (a *NotQualified) says why the job is not a
// gang and how to make it one.
func Groups(j GenericJob) ([]Group, error) {
	groups, nq := groupsOf(j)
	if nq != nil {
		return nil, nq
	}
	return groups, nil
}

func groupsOf(j GenericJob) ([]Group, *NotQualified) {
	if nq := j.Qualify(); nq != nil {
		return nil, nq
	}
	if nq := ScopeError(j); nq != nil {
		return nil, nq
	}
	minCount, nq := minCount(j)
	if nq != nil {
		return nil, nq
	}
	topo, nq := TopologyOf(j)
	if nq != nil {
		return nil, nq
	}
	name, roles := j.Object().GetName(), j.Roles()
	var out []Group
	if pg, ok := j.(PodGrouper); ok {
		if _, set := j.Object().GetAnnotations()[MinCountAnnotation]; set {
			return nil, &NotQualified{Condition: MinCountAnnotation + " is set on a " + j.GVK().Kind, Fix: "each of its groups needs all its pods; remove the annotation"}
		}
		out = pg.Groups()
	} else if Scope(j) == ScopeRole && len(roles) > 1 {
		for _, r := range roles {
			if !r.Solo {
				out = append(out, Group{Name: name + "-" + r.Name, Template: r.Name, MinCount: r.Count, Size: r.Count, Roles: []string{r.Name}})
			}
		}
	} else {
		g := Group{Name: name, Template: TemplateName, MinCount: minCount, Size: Size(j)}
		for _, r := range roles {
			if !r.Solo {
				g.Roles = append(g.Roles, r.Name)
			}
		}
		out = []Group{g}
	}
	classes := map[string]string{}
	for _, r := range roles {
		classes[r.Name] = r.Template.Spec.PriorityClassName
	}
	for i := range out {
		g := &out[i]
		g.Topology = groupTopology(j, *g, topo)
		g.PriorityClassName = classes[g.Roles[0]]
		for _, role := range g.Roles[1:] {
			if classes[role] != g.PriorityClassName {
				return nil, &NotQualified{
					Condition: fmt.Sprintf("roles %s and %s of one gang have different priority classes (%q, %q)", g.Roles[0], role, g.PriorityClassName, classes[role]),
					Fix:       "give every pod template of the gang the same priorityClassName, or set " + GangScopeAnnotation + ": role",
				}
			}
		}
		// The group's name is the value of the pods' membership label.
		if errs := validation.IsValidLabelValue(g.Name); len(errs) > 0 {
			return nil, &NotQualified{Condition: fmt.Sprintf("its group would be named %q, which is not a valid label value (%s)", g.Name, errs[0]),
				Fix: "shorten the job's (or role's) name to fit 63 characters"}
		}
	}
	return out, nil
}

// GroupOf is the group one of j's pods joins ("" if none), j being a gang.
func GroupOf(j GenericJob, groups []Group, pod *corev1.Pod) string {
	if pg, ok := j.(PodGrouper); ok {
		return pg.GroupOfPod(pod)
	}
	return GroupFor(groups, j.RoleOf(pod))
}

// GroupFor is the group a role's pods join, "" if none.
func GroupFor(groups []Group, role string) string {
	for _, g := range groups {
		if slices.Contains(g.Roles, role) {
			return g.Name
		}
	}
	return ""
}

// Set is the integrations Lockstep runs. A pod is matched against them in
// order, so an integration whose pods are also another's (a JobSet's pods
// are its Jobs' pods) comes before that other one.
type Set []Integration

// ForKind is the integration of the kind apiVersion/kind, nil if none.
func (s Set) ForKind(apiVersion, kind string) Integration {
	for _, integ := range s {
		gvk := integ.GVK()
		if gvk.Kind == kind && gvk.GroupVersion().String() == apiVersion {
			return integ
		}
	}
	return nil
}

// ForAlias is the integration `lockstep explain` names by alias, nil if none.
func (s Set) ForAlias(alias string) Integration {
	for _, integ := range s {
		if slices.Contains(integ.Aliases(), alias) {
			return integ
		}
	}
	return nil
}

// WrapperForAlias is the kind `lockstep explain` names by alias that runs
// as a job of integ (Wrapped); nil if none.
func (s Set) WrapperForAlias(alias string) (w *Wrapper, integ Integration) {
	for _, integ := range s {
		wr, ok := integ.(Wrapped)
		if !ok {
			continue
		}
		for _, w := range wr.WrappedBy() {
			if slices.Contains(w.Aliases, alias) {
				return &w, integ
			}
		}
	}
	return nil, nil
}

// Parent is the integration that controls o (a Job a JobSet created), nil
// when none does: such a job is part of its parent's gang, not one of its
// own.
func (s Set) Parent(o metav1.Object) Integration {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return s.ForKind(ref.APIVersion, ref.Kind)
	}
	return nil
}

// Owner is the job a pod belongs to.
type Owner struct {
	Integration Integration
	Name        string
	UID         types.UID
}

// OwnerOf is the job a pod belongs to, through the first integration that
// claims it; nil when none does.
func (s Set) OwnerOf(ctx context.Context, get Getter, pod *corev1.Pod) (*Owner, error) {
	for _, integ := range s {
		name, uid, err := integ.OwnerOf(ctx, get, pod)
		if err != nil {
			return nil, err
		}
		if name != "" {
			return &Owner{Integration: integ, Name: name, UID: uid}, nil
		}
	}
	return nil, nil
}
