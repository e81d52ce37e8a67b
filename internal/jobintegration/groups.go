package jobintegration

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Group is one PodGroup a job is made of.
type Group struct {
	// Name is the PodGroup's name (and the pods' membership label).
	Name string
	// Template is the Workload's pod group template the group comes from.
	Template string
	// MinCount is the gang's minimum; 0 (a role of a tree with no minimum)
	// makes a basic group, whose members are placed as they fit once its
	// tree is admitted.
	MinCount int32
	// Size is how many pods the group has when the job runs whole.
	Size int32
	// Roles are the roles whose pods join the group.
	Roles []string
	// PriorityClassName is the roles' pods' (one: a group's members have
	// one priority).
	PriorityClassName string
	// Topology is where the group must, and would rather, run (in a tree,
	// the root holds the required topology: Parent.Required).
	Topology Topology
	// Parent is the root of the tree the group is a child of, nil for a
	// group of its own.
	Parent *Composite
}

// Composite is the root CompositePodGroup of a job whose roles keep their
// own minimums: a gang of all its children (a child with no minimum counts
// with none of its pods placed), named after the job.
type Composite struct {
	Name          string
	MinGroupCount int32
	// Required is the topology the whole tree must run in.
	Required []string
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
	} else if tree, ok := treeOf(j, topo); ok {
		out = tree
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
		if g.Parent == nil {
			g.Topology = groupTopology(j, *g, topo)
		}
		g.PriorityClassName = classes[g.Roles[0]]
		for _, role := range g.Roles[1:] {
			if classes[role] != g.PriorityClassName {
				return nil, &NotQualified{
					Condition: fmt.Sprintf("roles %s and %s of one gang have different priority classes (%q, %q)", g.Roles[0], role, g.PriorityClassName, classes[role]),
					Fix:       "give every pod template of the gang the same priorityClassName, or set " + GangScopeAnnotation + ": role",
				}
			}
		}
		if g.Parent != nil && g.PriorityClassName != out[0].PriorityClassName {
			// A tree is placed and preempted as one: its members have one
			// priority.
			return nil, &NotQualified{
				Condition: fmt.Sprintf("roles %s and %s of one scheduling tree have different priority classes (%q, %q)", out[0].Roles[0], g.Roles[0], out[0].PriorityClassName, g.PriorityClassName),
				Fix:       "give every pod template of the job the same priorityClassName",
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

// treeOf is j's groups as a tree (RoleMinCounter), ok false when j is one
// flat gang: its kind states no per-role minimums, the min-count
// annotation or gang-scope "role" chose the shape, or it has fewer than
// two roles in its gang or more than a tree level holds. Every child is named <job>-<role>; the root,
// named after the job, holds the required topology, each child the
// preferred and device topology.
func treeOf(j GenericJob, topo Topology) ([]Group, bool) {
	rm, ok := j.(RoleMinCounter)
	if !ok {
		return nil, false
	}
	if _, set := j.Object().GetAnnotations()[MinCountAnnotation]; set || Scope(j) == ScopeRole {
		return nil, false
	}
	mins, ok := rm.RoleMinCounts()
	if !ok {
		return nil, false
	}
	name := j.Object().GetName()
	root := &Composite{Name: name, Required: topo.Required}
	leafTopo := Topology{Preferred: topo.Preferred, Device: topo.Device}
	var out []Group
	for _, r := range j.Roles() {
		if r.Solo {
			continue
		}
		out = append(out, Group{Name: name + "-" + r.Name, Template: r.Name, MinCount: min(mins[r.Name], r.Count), Size: r.Count, Roles: []string{r.Name}, Topology: leafTopo, Parent: root})
	}
	if len(out) < 2 || len(out) > lockv1.MaxChildren {
		return nil, false
	}
	root.MinGroupCount = int32(len(out))
	return out, true
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
