package preemption

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// TestTreeCandidates: the victim units of running trees — a group with
// disruptionMode all goes with the subtree under the highest CompositePodGroup
// with disruptionMode all above it, at the highest priority in it; under a
// parent with single it goes alone; a group with single is pods one by one.
func TestTreeCandidates(t *testing.T) {
	type group struct {
		parent string
		prio   int32
		single bool
	}
	cases := map[string]struct {
		composites map[string]*lockv1.CompositePodGroup
		groups     map[string]group
		want       []string
	}{
		"root all: the tree is one unit at its highest priority": {
			composites: map[string]*lockv1.CompositePodGroup{"job": tnode("job", "", false)},
			groups:     map[string]group{"w0": {parent: "job", prio: 10}, "w1": {parent: "job", prio: 50}, "flat": {prio: 20}},
			want:       []string{"CompositePodGroup ml/job: 4 pods, priority 50", "PodGroup ml/flat: 2 pods, priority 20"},
		},
		"root single: each child is its own unit": {
			composites: map[string]*lockv1.CompositePodGroup{"job": tnode("job", "", true)},
			groups:     map[string]group{"w0": {parent: "job", prio: 10}, "w1": {parent: "job", prio: 50}},
			want:       []string{"PodGroup ml/w0: 2 pods, priority 10", "PodGroup ml/w1: 2 pods, priority 50"},
		},
		"parent all under a root single: the parent's subtree is one unit": {
			composites: map[string]*lockv1.CompositePodGroup{"job": tnode("job", "", true), "mid": tnode("mid", "job", false)},
			groups:     map[string]group{"w0": {parent: "mid", prio: 10}, "w1": {parent: "mid", prio: 10}, "w2": {parent: "job", prio: 10}},
			want:       []string{"CompositePodGroup ml/mid: 4 pods, priority 10", "PodGroup ml/w2: 2 pods, priority 10"},
		},
		"a child with single goes pod by pod, its siblings as the tree": {
			composites: map[string]*lockv1.CompositePodGroup{"job": tnode("job", "", false)},
			groups:     map[string]group{"w0": {parent: "job", prio: 10}, "w1": {parent: "job", prio: 10, single: true}},
			want:       []string{"CompositePodGroup ml/job: 2 pods, priority 10", "pod ml/w1-0: 1 pods, priority 10", "pod ml/w1-1: 1 pods, priority 10"},
		},
		"a missing parent: the group is its own unit": {
			groups: map[string]group{"w0": {parent: "gone", prio: 10}},
			want:   []string{"PodGroup ml/w0: 2 pods, priority 10"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pgs := map[string]*lockv1.PodGroup{}
			prios := map[string]int32{}
			var pods []*corev1.Pod
			for _, g := range sortedKeys(tc.groups) {
				spec := tc.groups[g]
				pg := builders.GangPodGroup("ml", g, 2)
				if spec.parent != "" {
					pg.Spec.ParentCompositePodGroupName = ptr.To(spec.parent)
				}
				if spec.single {
					pg.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
				}
				pgs[g], prios[g] = pg, spec.prio
				for i := range 2 {
					p := builders.MakePod().Namespace("ml").Name(fmt.Sprintf("%s-%d", g, i)).Member(g).Node("node-0").Obj()
					p.Spec.Priority = ptr.To(spec.prio)
					p.Status.Phase = corev1.PodRunning
					pods = append(pods, p)
				}
			}
			cands := TreeCandidates(pods, func(_, name string) (*lockv1.PodGroup, int32) { return pgs[name], prios[name] },
				func(_, name string) *lockv1.CompositePodGroup { return tc.composites[name] })
			var got []string
			for _, c := range cands {
				got = append(got, fmt.Sprintf("%s: %d pods, priority %d", c.Name, len(c.Pods), c.Priority))
				if strings.HasPrefix(c.Name, "CompositePodGroup") && (!c.Whole || c.Tree.Name == "") {
					t.Errorf("%s: Whole %v, Tree %q; a tree is taken whole", c.Name, c.Whole, c.Tree)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("candidates (-want,+got):\n%s", diff)
			}
		})
	}
}

// Without a composite resolver (explain, tests), trees are not seen: each
// group is its own unit, as before.
func TestCandidatesSeeNoTrees(t *testing.T) {
	pg := builders.GangPodGroup("ml", "w0", 1)
	pg.Spec.ParentCompositePodGroupName = ptr.To("job")
	p := builders.MakePod().Namespace("ml").Name("w0-0").Member("w0").Node("node-0").Obj()
	p.Status.Phase = corev1.PodRunning
	cands := Candidates([]*corev1.Pod{p}, func(string, string) (*lockv1.PodGroup, int32) { return pg, 1 })
	if len(cands) != 1 || cands[0].Name != "PodGroup ml/w0" {
		t.Errorf("candidates: %+v", cands)
	}
}

func tnode(name, parent string, single bool) *lockv1.CompositePodGroup {
	c := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}}
	if parent != "" {
		c.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	if single {
		c.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
