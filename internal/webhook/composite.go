package webhook

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/api/meta"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// IndexParent indexes the webhook's PodGroups and CompositePodGroups by the
// CompositePodGroup they name as parent ("ns/name").
const IndexParent = "lockstep.parentCompositePodGroup"

// parentIndexValue is the IndexParent value of a PodGroup or a
// CompositePodGroup.
func parentIndexValue(o client.Object) []string {
	var p string
	switch x := o.(type) {
	case *lockv1.PodGroup:
		p = podgroup.ParentOf(x)
	case *lockv1.CompositePodGroup:
		p = podgroup.CompositeParent(x)
	}
	if p == "" {
		return nil
	}
	return []string{o.GetNamespace() + "/" + p}
}

// CompositePodGroupValidator refuses CompositePodGroups that could never be
// scheduled: a parent that makes the tree a cycle, a tree deeper than
// MaxTreeDepth levels, a parent with more than MaxChildren children, a
// topology key that cannot be a node label, a priority the group may not
// give itself. (The CRD schema runs first: one scheduling policy,
// minGroupCount 1..8, and the whole spec immutable, so only creations
// reach this webhook.) The parent is always in the group's namespace: the
// API has no field to name another. Every read is from the webhook's
// caches: a parent created a moment earlier and not cached yet counts as
// missing (a tree may be created in any order; its groups wait for it),
// and what a race lets through the scheduler still refuses
// (podgroup.ResolveTree) with the same limits.
type CompositePodGroupValidator struct {
	reads
	topologyView
}

var _ admission.Validator[*lockv1.CompositePodGroup] = (*CompositePodGroupValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *CompositePodGroupValidator) ValidateCreate(ctx context.Context, c *lockv1.CompositePodGroup) (admission.Warnings, error) {
	ns := namespaceOf(ctx, c.Namespace)
	spec := field.NewPath("spec")
	errs := validateTopologyAt(spec, c.Spec.SchedulingConstraints, "CompositePodGroup")
	// Its topology annotations mean what a PodGroup's do.
	asGroup := &lockv1.PodGroup{ObjectMeta: c.ObjectMeta}
	asGroup.Spec.SchedulingConstraints = c.Spec.SchedulingConstraints
	errs = append(errs, validateTopologyAnnotations(nil, asGroup)...)
	errs = append(errs, validatePriority(ctx, v.Cached, spec, c.Spec.PriorityClassName, c.Spec.Priority)...)
	errs = append(errs, classForbiddenByQuota(ctx, v.Cached, ns, spec, c.Spec.PriorityClassName)...)
	treeErrs, err := treeChecks{v.Cached}.place(ctx, ns, node{name: c.Name, composite: true}, podgroup.CompositeParent(c))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	errs = append(errs, treeErrs...)
	warnings := v.topologyWarnings("tree", asGroup, specKeyAt)
	if len(errs) == 0 {
		return warnings, nil
	}
	return warnings, apierrors.NewInvalid(schema.GroupKind{Group: lockv1.GroupVersion.Group, Kind: "CompositePodGroup"}, c.Name, errs)
}

// ValidateUpdate implements admission.Validator: nothing to judge — the
// CRD schema fixes the whole spec at creation (and the configuration sends
// no update here).
func (v *CompositePodGroupValidator) ValidateUpdate(context.Context, *lockv1.CompositePodGroup, *lockv1.CompositePodGroup) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete implements admission.Validator.
func (v *CompositePodGroupValidator) ValidateDelete(context.Context, *lockv1.CompositePodGroup) (admission.Warnings, error) {
	return nil, nil
}

// node is a tree node being created: a CompositePodGroup or a PodGroup.
type node struct {
	name      string
	composite bool
}

func (n node) kind() string {
	if n.composite {
		return "CompositePodGroup"
	}
	return "PodGroup"
}

// treeChecks judge where a new node hangs in its namespace's tree, from
// the cache only.
type treeChecks struct {
	Cached client.Reader
}

var parentPath = field.NewPath("spec", "parentCompositePodGroupName")

// place checks a new node under parent ("" for a root): no cycle, at most
// MaxTreeDepth levels of CompositePodGroups from the root down to the
// deepest one under the node, at most MaxChildren children of parent.
func (t treeChecks) place(ctx context.Context, ns string, n node, parent string) (field.ErrorList, error) {
	if n.composite && parent == n.name {
		return field.ErrorList{field.Invalid(parentPath, parent,
			"a CompositePodGroup cannot be its own parent: a tree cannot be a cycle; name another CompositePodGroup, or remove the field to make this group a root")}, nil
	}
	above, cycle, err := t.ancestors(ctx, ns, n, parent)
	if meta.IsNoMatchError(err) {
		return field.ErrorList{field.Forbidden(parentPath, fmt.Sprintf(
			"the API server does not serve CompositePodGroups (%s): a group naming parent %q would wait for ever; apply the CRDs of this Lockstep release (the chart's crds/, which `helm upgrade` does not apply), or remove the field",
			lockv1.GroupVersion.String(), parent))}, nil
	}
	if err != nil || cycle != "" {
		return cycleError(parent, cycle), err
	}
	below := 0
	if n.composite {
		if below, err = t.height(ctx, ns, n.name, lockv1.MaxTreeDepth); err != nil {
			return nil, err
		}
	}
	var errs field.ErrorList
	if levels := len(above) + below + boolInt(n.composite); levels > lockv1.MaxTreeDepth {
		errs = append(errs, depthError(n, parent, above, below, levels))
	}
	if parent == "" {
		return errs, nil
	}
	siblings, err := t.children(ctx, ns, parent)
	if err != nil {
		return nil, err
	}
	if len(siblings) >= lockv1.MaxChildren {
		errs = append(errs, field.Forbidden(parentPath, fmt.Sprintf(
			"CompositePodGroup %s already has %d children (%s), the most a tree node may have: a %s would be its %d%s; group some of them under a CompositePodGroup of their own, or hang this one under another parent",
			parent, len(siblings), strings.Join(siblings, ", "), n.kind(), len(siblings)+1, ordinal(len(siblings)+1))))
	}
	return errs, nil
}

// ancestors walks up from parent through the cached CompositePodGroups:
// the names above the node, nearest first (a missing one ends the walk and
// counts — it must exist before the tree is scheduled), or the chain that
// leads back to the node itself or loops above it.
func (t treeChecks) ancestors(ctx context.Context, ns string, n node, parent string) ([]string, string, error) {
	var above []string
	seen := map[string]bool{}
	for name := parent; name != ""; {
		if seen[name] || (n.composite && name == n.name) {
			return nil, strings.Join(append(above, name), " → "), nil
		}
		seen[name] = true
		above = append(above, name)
		c := &lockv1.CompositePodGroup{}
		err := t.Cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c)
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		name = podgroup.CompositeParent(c)
	}
	return above, "", nil
}

// height is how many levels of CompositePodGroups already hang under name
// (created before it), looking at most limit levels down.
func (t treeChecks) height(ctx context.Context, ns, name string, limit int) (int, error) {
	if limit == 0 {
		return 0, nil
	}
	list := &lockv1.CompositePodGroupList{}
	if err := t.Cached.List(ctx, list, client.InNamespace(ns), client.MatchingFields{IndexParent: ns + "/" + name}); err != nil {
		return 0, err
	}
	best := 0
	for _, c := range list.Items {
		h, err := t.height(ctx, ns, c.Name, limit-1)
		if err != nil {
			return 0, err
		}
		best = max(best, h+1)
	}
	return best, nil
}

// children names the PodGroups and CompositePodGroups that name parent,
// sorted.
func (t treeChecks) children(ctx context.Context, ns, parent string) ([]string, error) {
	key := client.MatchingFields{IndexParent: ns + "/" + parent}
	groups := &lockv1.PodGroupList{}
	if err := t.Cached.List(ctx, groups, client.InNamespace(ns), key); err != nil {
		return nil, err
	}
	composites := &lockv1.CompositePodGroupList{}
	if err := t.Cached.List(ctx, composites, client.InNamespace(ns), key); err != nil {
		return nil, err
	}
	var out []string
	for _, g := range groups.Items {
		out = append(out, "PodGroup "+g.Name)
	}
	for _, c := range composites.Items {
		out = append(out, "CompositePodGroup "+c.Name)
	}
	sort.Strings(out)
	return out, nil
}

func cycleError(parent, cycle string) field.ErrorList {
	if cycle == "" {
		return nil
	}
	return field.ErrorList{field.Invalid(parentPath, parent, fmt.Sprintf(
		"the parents form a cycle (%s): a tree must end at a root, a CompositePodGroup without parentCompositePodGroupName; name a parent outside the cycle", cycle))}
}

func depthError(n node, parent string, above []string, below, levels int) *field.Error {
	path, value := parentPath, any(parent)
	if parent == "" {
		path, value = field.NewPath("metadata", "name"), n.name
	}
	return field.Invalid(path, value, fmt.Sprintf(
		"the tree would have %d levels of CompositePodGroups (%d above this %s, %d under it), more than %d: flatten it, e.g. hang the groups of a level directly under the level above",
		levels, len(above), n.kind(), below, lockv1.MaxTreeDepth))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}
