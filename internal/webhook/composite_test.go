package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// treeReads is a cache holding objs, indexed as the webhook's is.
func treeReads(objs ...client.Object) reads {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(objs...).
		WithIndex(&lockv1.PodGroup{}, IndexParent, parentIndexValue).
		WithIndex(&lockv1.CompositePodGroup{}, IndexParent, parentIndexValue).Build()
	return testReads(c)
}

// composite is a gang CompositePodGroup in team-a under parent ("" for a
// root).
func composite(name, parent string) *lockv1.CompositePodGroup {
	c := &lockv1.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec: lockv1.CompositePodGroupSpec{SchedulingPolicy: lockv1.CompositePodGroupSchedulingPolicy{
			Gang: &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 1}}},
	}
	if parent != "" {
		c.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	return c
}

// leaf is a gang PodGroup in team-a under parent.
func leaf(name, parent string) *lockv1.PodGroup {
	pg := builders.GangPodGroup("team-a", name, 2)
	if parent != "" {
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	return pg
}

// chain is CompositePodGroups c1 (a root) → c2 → … → cN, each under the
// previous one.
func chain(n int) []client.Object {
	var out []client.Object
	for i := 1; i <= n; i++ {
		parent := ""
		if i > 1 {
			parent = fmt.Sprintf("c%d", i-1)
		}
		out = append(out, composite(fmt.Sprintf("c%d", i), parent))
	}
	return out
}

// children are n PodGroups under parent.
func children(parent string, n int) []client.Object {
	var out []client.Object
	for i := range n {
		out = append(out, leaf(fmt.Sprintf("%s-g%d", parent, i), parent))
	}
	return out
}

// TestCompositePodGroupValidatorCreate: a CompositePodGroup that makes its
// tree a cycle, deeper than 4 levels (counting ancestors, a missing one,
// and levels already created under it), or a 9th child is refused at
// spec.parentCompositePodGroupName with the condition and the fix; bad
// topology keys and self-granted priorities at their own paths. A root, a
// 4-level tree, an 8th child, a parent not created yet and a valid key are
// admitted.
func TestCompositePodGroupValidatorCreate(t *testing.T) {
	class := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	withKeys := func(keys ...string) *lockv1.CompositePodGroup {
		c := composite("zoned", "")
		c.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
		for _, k := range keys {
			c.Spec.SchedulingConstraints.Topology = append(c.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
		}
		return c
	}
	withPriority := func(className string, p *int32) *lockv1.CompositePodGroup {
		c := composite("prio", "")
		c.Spec.PriorityClassName, c.Spec.Priority = className, p
		return c
	}
	mixed := append(children("c1", 5), composite("k1", "c1"), composite("k2", "c1"), composite("k3", "c1"))
	for name, tc := range map[string]struct {
		objs       []client.Object
		c          *lockv1.CompositePodGroup
		wantFields []string
		wantMsg    []string
	}{
		"a root": {c: composite("root", "")},
		"its own parent": {c: composite("a", "a"), wantFields: []string{"spec.parentCompositePodGroupName"},
			wantMsg: []string{"cannot be its own parent", "remove the field to make this group a root"}},
		"a parent whose parent is this group": {objs: []client.Object{composite("b", "a")}, c: composite("a", "b"),
			wantFields: []string{"spec.parentCompositePodGroupName"}, wantMsg: []string{"the parents form a cycle (b → a)", "name a parent outside the cycle"}},
		"a parent in a loop of others": {objs: []client.Object{composite("x", "y"), composite("y", "x")}, c: composite("a", "x"),
			wantFields: []string{"spec.parentCompositePodGroupName"}, wantMsg: []string{"the parents form a cycle (x → y → x)"}},
		"the 4th level": {objs: chain(3), c: composite("c4", "c3")},
		"the 5th level": {objs: chain(4), c: composite("c5", "c4"), wantFields: []string{"spec.parentCompositePodGroupName"},
			wantMsg: []string{"would have 5 levels", "(4 above this CompositePodGroup, 0 under it), more than 4", "flatten it"}},
		"a missing parent": {c: composite("child", "not-yet")},
		"a missing parent counting as the 5th level": {objs: []client.Object{composite("y1", "x"), composite("y2", "y1"), composite("y3", "y2")},
			c: composite("x", "not-yet"), wantFields: []string{"spec.parentCompositePodGroupName"}, wantMsg: []string{"(1 above this CompositePodGroup, 3 under it)"}},
		"a root over 4 levels created first": {objs: []client.Object{composite("c2", "c1"), composite("c3", "c2"), composite("c4", "c3"), composite("c5", "c4")},
			c: composite("c1", ""), wantFields: []string{"metadata.name"}, wantMsg: []string{"(0 above this CompositePodGroup, 4 under it)"}},
		"a middle level joining two chains into 5": {objs: []client.Object{composite("c1", ""), composite("c2", "c1"), composite("c4", "c3"), composite("c5", "c4")},
			c: composite("c3", "c2"), wantFields: []string{"spec.parentCompositePodGroupName"}, wantMsg: []string{"(2 above this CompositePodGroup, 2 under it)"}},
		"the 8th child": {objs: append(children("c1", 6), composite("c1", ""), composite("k", "c1")), c: composite("k8", "c1")},
		"a 9th child of PodGroups and CompositePodGroups": {objs: append(mixed, composite("c1", "")), c: composite("k9", "c1"), wantFields: []string{"spec.parentCompositePodGroupName"},
			wantMsg: []string{"CompositePodGroup c1 already has 8 children (CompositePodGroup k1, CompositePodGroup k2, CompositePodGroup k3, PodGroup c1-g0, "}},
		"a 9th child of 8": {objs: append(children("c1", 8), composite("c1", "")), c: composite("k9", "c1"), wantFields: []string{"spec.parentCompositePodGroupName"},
			wantMsg: []string{"already has 8 children (PodGroup c1-g0, ", "a CompositePodGroup would be its 9th", "group some of them under a CompositePodGroup of their own"}},
		"children of another namespace's parent of the same name": {objs: append(children("other", 0), otherNamespace(children("c1", 8))...), c: composite("k9", "c1")},
		"valid topology keys": {c: withKeys("topology.kubernetes.io/zone", "example.com/rack")},
		"a topology key with a space": {c: withKeys("topology.kubernetes.io/zone", "rack name"), wantFields: []string{"spec.schedulingConstraints.topology[1].key"},
			wantMsg: []string{"not a valid label key", "the CompositePodGroup could never be placed"}},
		"a class that exists":      {objs: []client.Object{class}, c: withPriority("high", nil)},
		"a class that does not":    {c: withPriority("gold", nil), wantFields: []string{"spec.priorityClassName"}, wantMsg: []string{"PriorityClass does not exist"}},
		"a priority without class": {c: withPriority("", ptr.To[int32](5)), wantFields: []string{"spec.priority"}, wantMsg: []string{"set priorityClassName instead"}},
		"a priority above its class": {objs: []client.Object{class}, c: withPriority("high", ptr.To[int32](2000)), wantFields: []string{"spec.priority"},
			wantMsg: []string{"does not match PriorityClass high (1000)"}},
	} {
		t.Run(name, func(t *testing.T) {
			v := &CompositePodGroupValidator{reads: treeReads(tc.objs...)}
			_, err := v.ValidateCreate(context.Background(), tc.c)
			if diff := cmp.Diff(tc.wantFields, causes(err)); diff != "" {
				t.Errorf("refused fields (-want,+got):\n%s\n%v", diff, err)
			}
			for _, want := range tc.wantMsg {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("want the refusal to say %q, got %v", want, err)
				}
			}
		})
	}
}

func otherNamespace(objs []client.Object) []client.Object {
	for _, o := range objs {
		o.SetNamespace("team-b")
	}
	return objs
}

// TestPodGroupInATree: a PodGroup under a parent is refused when it would
// be a 9th child or sit under more than 4 levels of CompositePodGroups,
// admitted as an 8th child, under 4 levels or a parent not created yet; a
// flat PodGroup is judged as before (no tree lookups refuse it). Its
// parent cannot change, be added or be removed.
func TestPodGroupInATree(t *testing.T) {
	for name, tc := range map[string]struct {
		objs       []client.Object
		pg         *lockv1.PodGroup
		wantFields []string
		wantMsg    []string
	}{
		"a flat group":        {objs: chain(4), pg: leaf("flat", "")},
		"under 4 levels":      {objs: chain(4), pg: leaf("g", "c4")},
		"under a missing one": {pg: leaf("g", "not-yet")},
		"under 5 levels": {objs: append(chain(4), composite("c5", "c4")), pg: leaf("g", "c5"), wantFields: []string{"spec.parentCompositePodGroupName"},
			wantMsg: []string{"would have 5 levels of CompositePodGroups (5 above this PodGroup, 0 under it), more than 4"}},
		"an 8th child": {objs: append(children("c1", 7), composite("c1", "")), pg: leaf("g", "c1")},
		"a 9th child": {objs: append(children("c1", 8), composite("c1", "")), pg: leaf("g", "c1"), wantFields: []string{"spec.parentCompositePodGroupName"},
			wantMsg: []string{"already has 8 children", "a PodGroup would be its 9th"}},
	} {
		t.Run(name, func(t *testing.T) {
			v := &PodGroupValidator{reads: treeReads(tc.objs...)}
			_, err := v.ValidateCreate(context.Background(), tc.pg)
			if diff := cmp.Diff(tc.wantFields, causes(err)); diff != "" {
				t.Errorf("refused fields (-want,+got):\n%s\n%v", diff, err)
			}
			for _, want := range tc.wantMsg {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("want the refusal to say %q, got %v", want, err)
				}
			}
		})
	}
	for name, tc := range map[string]struct {
		old, new  string
		wantField []string
	}{
		"kept":    {old: "a", new: "a"},
		"changed": {old: "a", new: "b", wantField: []string{"spec.parentCompositePodGroupName"}},
		"added":   {old: "", new: "b", wantField: []string{"spec.parentCompositePodGroupName"}},
		"removed": {old: "a", new: "", wantField: []string{"spec.parentCompositePodGroupName"}},
	} {
		t.Run("update: "+name, func(t *testing.T) {
			v := &PodGroupValidator{reads: treeReads()}
			_, err := v.ValidateUpdate(context.Background(), leaf("g", tc.old), leaf("g", tc.new))
			if diff := cmp.Diff(tc.wantField, causes(err)); diff != "" {
				t.Errorf("refused fields (-want,+got):\n%s\n%v", diff, err)
			}
			if err != nil && !strings.Contains(err.Error(), "fixed when it is created") {
				t.Errorf("want the refusal to say the parent is fixed at creation, got %v", err)
			}
		})
	}
}

// A webhook started without CompositePodGroups served (an upgrade left
// their CRD out) refuses a PodGroup that names a parent, saying the CRD is
// missing, and admits a flat one.
func TestPodGroupParentWithoutComposites(t *testing.T) {
	notServed := interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*lockv1.CompositePodGroup); ok {
				return &meta.NoKindMatchError{GroupKind: lockv1.GroupVersion.WithKind("CompositePodGroup").GroupKind(), SearchedVersions: []string{"v1beta1"}}
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithInterceptorFuncs(notServed).
		WithIndex(&lockv1.PodGroup{}, IndexParent, parentIndexValue).Build()
	v := &PodGroupValidator{reads: testReads(c)}
	_, err := v.ValidateCreate(context.Background(), leaf("g", "root"))
	if diff := cmp.Diff([]string{"spec.parentCompositePodGroupName"}, causes(err)); diff != "" {
		t.Errorf("refused fields (-want,+got):\n%s\n%v", diff, err)
	}
	if err == nil || !strings.Contains(err.Error(), "the API server does not serve CompositePodGroups") {
		t.Errorf("want the refusal to name the missing CRD, got %v", err)
	}
	if _, err := v.ValidateCreate(context.Background(), leaf("flat", "")); err != nil {
		t.Errorf("a flat PodGroup refused: %v", err)
	}
}

// A PodGroup or CompositePodGroup naming a PriorityClass that a quota of
// its namespace allows no pod of is refused, naming the quota: the group's
// priority is its members', and none can have the class there. The same
// class in a namespace without such a quota, or with a quota for another
// class, is admitted.
func TestGroupClassForbiddenByQuota(t *testing.T) {
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	noHigh := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "no-high"}, Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")},
		ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
			ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}},
	}}
	elsewhere := noHigh.DeepCopy()
	elsewhere.Namespace = "team-b"
	for name, tc := range map[string]struct {
		objs []client.Object
		want bool
	}{
		"forbidden here":            {objs: []client.Object{high, noHigh}, want: true},
		"no quota":                  {objs: []client.Object{high}},
		"forbidden in another team": {objs: []client.Object{high, elsewhere}},
	} {
		t.Run(name, func(t *testing.T) {
			r := treeReads(tc.objs...)
			c := composite("root", "")
			c.Spec.PriorityClassName = "high"
			pg := leaf("g", "")
			pg.Spec.PriorityClassName = "high"
			_, errC := (&CompositePodGroupValidator{reads: r}).ValidateCreate(context.Background(), c)
			_, errG := (&PodGroupValidator{reads: r}).ValidateCreate(context.Background(), pg)
			for kind, err := range map[string]error{"CompositePodGroup": errC, "PodGroup": errG} {
				refused := err != nil && strings.Contains(err.Error(), "ResourceQuota no-high of namespace team-a allows no pod of PriorityClass high (pods: 0)")
				if refused != tc.want {
					t.Errorf("%s: refused by the quota %v, want %v (%v)", kind, refused, tc.want, err)
				}
			}
		})
	}
}
