package integrity

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// node is a CompositePodGroup of the test trees; single sets
// disruptionMode single (nil is all).
func node(name, parent string, single bool) *lockv1.CompositePodGroup {
	c := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}}
	if parent != "" {
		c.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	if single {
		c.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	}
	return c
}

// leaf is a running PodGroup under parent bound a minute before now;
// ended, when set, ends its incarnation now with that reason.
func leaf(name, parent, ended string) *lockv1.PodGroup {
	pg := builders.GangPodGroup("ml", name, 2)
	if parent != "" {
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	pod := builders.MakePod().Namespace("ml").Name(name + "-0").Member(name).Node("node-0").Obj()
	pod.UID = types.UID(name + "-uid")
	pg.Status.Incarnation = podgroup.Record(nil, 2, []*corev1.Pod{pod}, []*corev1.Pod{pod}, metav1.NewTime(now.Add(-time.Minute)))
	if ended != "" {
		pg.Status.Incarnation.Ended = &lockv1.PodGroupIncarnationEnd{Reason: ended, Message: "pod " + name + "-0 was deleted", Time: metav1.NewTime(now)}
	}
	return pg
}

func getter(cs ...*lockv1.CompositePodGroup) func(string) *lockv1.CompositePodGroup {
	return func(name string) *lockv1.CompositePodGroup {
		for _, c := range cs {
			if c.Name == name {
				return c
			}
		}
		return nil
	}
}

func TestTreeRestarts(t *testing.T) {
	later := leaf("w1", "job", "")
	later.Status.Incarnation.BoundTime = metav1.NewTime(now.Add(time.Second))
	finished := leaf("w1", "job", ReasonCompleted)
	pending := leaf("w1", "job", "")
	pending.Status.Incarnation = nil
	cases := map[string]struct {
		lost       *lockv1.PodGroup
		composites []*lockv1.CompositePodGroup
		others     []*lockv1.PodGroup
		want       []string
	}{
		"root all (nil): the sibling restarts with the tree": {
			lost: leaf("w0", "job", ReasonMemberLost), composites: []*lockv1.CompositePodGroup{node("job", "", false)},
			others: []*lockv1.PodGroup{leaf("w1", "job", "")}, want: []string{"w1"},
		},
		"root single: only the group that lost a member restarts": {
			lost: leaf("w0", "job", ReasonMemberLost), composites: []*lockv1.CompositePodGroup{node("job", "", true)},
			others: []*lockv1.PodGroup{leaf("w1", "job", "")},
		},
		"parent single under a root all: the restart stops at the parent": {
			lost:       leaf("w0", "mid", ReasonMemberLost),
			composites: []*lockv1.CompositePodGroup{node("job", "", false), node("mid", "job", true)},
			others:     []*lockv1.PodGroup{leaf("w1", "mid", ""), leaf("w2", "job", "")},
		},
		"parent all under a root all: the whole tree restarts": {
			lost:       leaf("w0", "mid", ReasonNodeLost),
			composites: []*lockv1.CompositePodGroup{node("job", "", false), node("mid", "job", false)},
			others:     []*lockv1.PodGroup{leaf("w1", "mid", ""), leaf("w2", "job", "")},
			want:       []string{"w1", "w2"},
		},
		"parent all under a root single: the parent's subtree restarts, not its sibling": {
			lost:       leaf("w0", "mid", ReasonDeviceFailed),
			composites: []*lockv1.CompositePodGroup{node("job", "", true), node("mid", "job", false)},
			others:     []*lockv1.PodGroup{leaf("w1", "mid", ""), leaf("w2", "job", "")},
			want:       []string{"w1"},
		},
		"a flat group's loss restarts no one else": {
			lost: leaf("flat", "", ReasonMemberLost), composites: []*lockv1.CompositePodGroup{node("job", "", false)},
			others: []*lockv1.PodGroup{leaf("w1", "job", "")},
		},
		"another tree's group is left alone": {
			lost:       leaf("w0", "job", ReasonMemberLost),
			composites: []*lockv1.CompositePodGroup{node("job", "", false), node("other", "", false)},
			others:     []*lockv1.PodGroup{leaf("x0", "other", "")},
		},
		"a sibling that finished is left alone":        {lost: leaf("w0", "job", ReasonMemberLost), composites: []*lockv1.CompositePodGroup{node("job", "", false)}, others: []*lockv1.PodGroup{finished}},
		"a sibling never admitted is left alone":       {lost: leaf("w0", "job", ReasonMemberLost), composites: []*lockv1.CompositePodGroup{node("job", "", false)}, others: []*lockv1.PodGroup{pending}},
		"a sibling bound after the loss is left alone": {lost: leaf("w0", "job", ReasonMemberLost), composites: []*lockv1.CompositePodGroup{node("job", "", false)}, others: []*lockv1.PodGroup{later}},
		"a group that finished restarts no one": {
			lost: leaf("w0", "job", ReasonCompleted), composites: []*lockv1.CompositePodGroup{node("job", "", false)}, others: []*lockv1.PodGroup{leaf("w1", "job", "")},
		},
		"a group whose owner stopped restarts no one": {
			lost: leaf("w0", "job", ReasonOwnerStopped), composites: []*lockv1.CompositePodGroup{node("job", "", false)}, others: []*lockv1.PodGroup{leaf("w1", "job", "")},
		},
		"a preempted group restarts no one (the preemption takes what it must)": {
			lost: leaf("w0", "job", lockv1.PodGroupReasonPreemption), composites: []*lockv1.CompositePodGroup{node("job", "", false)}, others: []*lockv1.PodGroup{leaf("w1", "job", "")},
		},
		"a group restarted with its tree does not restart it again": {
			lost: leaf("w0", "job", ReasonTreeMemberLost), composites: []*lockv1.CompositePodGroup{node("job", "", false)}, others: []*lockv1.PodGroup{leaf("w1", "job", "")},
		},
		"a running group restarts no one": {
			lost: leaf("w0", "job", ""), composites: []*lockv1.CompositePodGroup{node("job", "", false)}, others: []*lockv1.PodGroup{leaf("w1", "job", "")},
		},
		"a missing parent: no tree to restart": {
			lost: leaf("w0", "gone", ReasonMemberLost), others: []*lockv1.PodGroup{leaf("w1", "gone", "")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			groups := append([]*lockv1.PodGroup{tc.lost}, tc.others...)
			var got []string
			for _, tr := range TreeRestarts(tc.lost, groups, getter(tc.composites...)) {
				got = append(got, tr.Group.Name)
				if e := tr.Incarnation.Ended; e == nil || e.Reason != ReasonTreeMemberLost || !e.Time.Equal(&tc.lost.Status.Incarnation.Ended.Time) {
					t.Errorf("%s: ended %+v, want reason %s at the loss's time", tr.Group.Name, e, ReasonTreeMemberLost)
				}
				if tr.Group.Status.Incarnation.Ended != nil {
					t.Errorf("%s: TreeRestarts changed its input", tr.Group.Name)
				}
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("restarted (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestReconcileRestartsTheTree: a member of w0 is deleted under a root with
// disruptionMode all: w0's reconciliation ends w0's incarnation and w1's
// (TreeMemberLost, DisruptionTarget, an event); w1's own reconciliation
// then evicts its members. Under a root with disruptionMode single, w1 is
// untouched.
func TestReconcileRestartsTheTree(t *testing.T) {
	cases := map[string]struct {
		single bool
		// w0Deleted: its owner deleted w0 (the API server has it no more;
		// the cache still does).
		w0Deleted   bool
		wantW1      string
		wantEvicted int
	}{
		"root all: w1 restarts with w0":                       {wantW1: ReasonTreeMemberLost, wantEvicted: 2},
		"root single: w1 keeps running, untold":               {single: true},
		"root all, w0 deleted by its owner: w1 keeps running": {w0Deleted: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}, node("job", "", tc.single),
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
			for _, g := range []string{"w0", "w1"} {
				var pods []*corev1.Pod
				for i := range 2 {
					p := builders.MakePod().Namespace("ml").Name(fmt.Sprintf("%s-%d", g, i)).Member(g).Node("node-0").Obj()
					p.UID = types.UID(p.Name)
					p.Status.Phase = corev1.PodRunning
					pods = append(pods, p)
				}
				pg := builders.GangPodGroup("ml", g, 2)
				pg.Spec.ParentCompositePodGroupName = ptr.To("job")
				pg.Status.Incarnation = podgroup.Record(nil, 2, pods, pods, metav1.NewTime(now.Add(-time.Minute)))
				objs = append(objs, pg)
				if g == "w0" {
					pods = pods[1:] // w0-0 was deleted
				}
				for _, p := range pods {
					objs = append(objs, p)
				}
			}
			c := indexedClient(objs...)
			apiServer := c
			if tc.w0Deleted {
				var rest []client.Object
				for _, o := range objs {
					if _, ok := o.(*lockv1.PodGroup); !ok || o.GetName() != "w0" {
						rest = append(rest, o)
					}
				}
				apiServer = indexedClient(rest...)
			}
			r, rec := testReconciler(c, apiServer)
			ctx := context.Background()
			for _, g := range []string{"w0", "w1"} {
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: g}}); err != nil {
					t.Fatal(err)
				}
			}
			w1 := &lockv1.PodGroup{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: "ml", Name: "w1"}, w1); err != nil {
				t.Fatal(err)
			}
			got := ""
			if e := w1.Status.Incarnation.Ended; e != nil {
				got = e.Reason
				if want := "PodGroup w0 lost a member (pod w0-0 was deleted) and CompositePodGroup job restarts its tree whole (disruptionMode all)"; e.Message != want {
					t.Errorf("w1 ended with %q, want %q", e.Message, want)
				}
				if d := meta.FindStatusCondition(w1.Status.Conditions, lockv1.DisruptionTarget); d == nil || d.Reason != ReasonTreeMemberLost {
					t.Errorf("w1's DisruptionTarget condition: %+v", d)
				}
			}
			if got != tc.wantW1 {
				t.Errorf("w1's incarnation ended with %q, want %q", got, tc.wantW1)
			}
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace("ml"), client.MatchingFields{indexGroup: "w1"}); err != nil {
				t.Fatal(err)
			}
			if evicted := 2 - len(pods.Items); evicted != tc.wantEvicted {
				t.Errorf("%d members of w1 evicted, want %d", evicted, tc.wantEvicted)
			}
			events := 0
			for len(rec.Events) > 0 {
				<-rec.Events
				events++
			}
			want := 1 // w0's restart
			if tc.wantW1 != "" {
				want++ // w1's, with its tree
			}
			if events != want {
				t.Errorf("%d events, want %d", events, want)
			}
		})
	}
}

// gangNode is node with a gang policy of minGroupCount.
func gangNode(name, parent string, minGroupCount int32) *lockv1.CompositePodGroup {
	c := node(name, parent, false)
	c.Spec.SchedulingPolicy.Gang = &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}
	return c
}

func TestTreeShort(t *testing.T) {
	deleting := leaf("w1", "job", "")
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	single := gangNode("job", "", 2)
	single.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	cases := map[string]struct {
		composites []*lockv1.CompositePodGroup
		groups     []*lockv1.PodGroup
		wanted     map[string]int
		want       string
	}{
		"both children: whole": {
			composites: []*lockv1.CompositePodGroup{gangNode("job", "", 2)},
			groups:     []*lockv1.PodGroup{leaf("w0", "job", ""), leaf("w1", "job", "")},
		},
		"a child deleted below minGroupCount": {
			composites: []*lockv1.CompositePodGroup{gangNode("job", "", 2)},
			groups:     []*lockv1.PodGroup{leaf("w0", "job", "")},
			want:       "CompositePodGroup job has 1 of minGroupCount 2 groups (one was deleted) and restarts its tree whole (disruptionMode all)",
		},
		"a child being deleted does not count": {
			composites: []*lockv1.CompositePodGroup{gangNode("job", "", 2)},
			groups:     []*lockv1.PodGroup{leaf("w0", "job", ""), deleting},
			want:       "CompositePodGroup job has 1 of minGroupCount 2 groups (one was deleted) and restarts its tree whole (disruptionMode all)",
		},
		"still at minGroupCount": {
			composites: []*lockv1.CompositePodGroup{gangNode("job", "", 1)},
			groups:     []*lockv1.PodGroup{leaf("w0", "job", "")},
		},
		"a basic root has no minimum": {
			composites: []*lockv1.CompositePodGroup{node("job", "", false)},
			groups:     []*lockv1.PodGroup{leaf("w0", "job", "")},
		},
		"disruptionMode single: the tree is not restarted whole": {
			composites: []*lockv1.CompositePodGroup{single},
			groups:     []*lockv1.PodGroup{leaf("w0", "job", "")},
		},
		"a composite child counts; its own shortage restarts the tree above": {
			composites: []*lockv1.CompositePodGroup{gangNode("job", "", 2), gangNode("mid", "job", 2)},
			groups:     []*lockv1.PodGroup{leaf("w0", "mid", ""), leaf("x", "job", "")},
			want:       "CompositePodGroup mid has 1 of minGroupCount 2 groups (one was deleted) and restarts its tree whole (disruptionMode all)",
		},
		"its owner dropped the other role: no longer wanted, not short": {
			composites: []*lockv1.CompositePodGroup{gangNode("job", "", 2)},
			groups:     []*lockv1.PodGroup{leaf("w0", "job", "")},
			wanted:     map[string]int{"job": 1},
		},
		"its owner still wants both: short": {
			composites: []*lockv1.CompositePodGroup{gangNode("job", "", 2)},
			groups:     []*lockv1.PodGroup{leaf("w0", "job", "")},
			wanted:     map[string]int{"job": 2},
			want:       "CompositePodGroup job has 1 of minGroupCount 2 groups (one was deleted) and restarts its tree whole (disruptionMode all)",
		},
		"no tree": {groups: []*lockv1.PodGroup{leaf("w0", "", "")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := TreeShort(tc.groups[0], tc.groups, tc.composites, tc.wanted); got != tc.want {
				t.Errorf("TreeShort = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReconcileRestartsATreeShortOfAGroup: one PodGroup of a bound tree
// under a gang root of minGroupCount 2 is deleted (with its pods): the
// other's reconciliation ends its incarnation (TreeMemberLost) and evicts
// its members — the tree restarts whole, as a gang below minCount does. At
// minGroupCount 1 the other keeps running.
func TestReconcileRestartsATreeShortOfAGroup(t *testing.T) {
	for _, tc := range []struct {
		minGroupCount int32
		wantEnded     string
		wantEvicted   int
	}{
		{minGroupCount: 2, wantEnded: ReasonTreeMemberLost, wantEvicted: 2},
		{minGroupCount: 1},
	} {
		t.Run(fmt.Sprintf("minGroupCount %d", tc.minGroupCount), func(t *testing.T) {
			objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}, gangNode("job", "", tc.minGroupCount),
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
			var pods []*corev1.Pod
			for i := range 2 {
				p := builders.MakePod().Namespace("ml").Name(fmt.Sprintf("w1-%d", i)).Member("w1").Node("node-0").Obj()
				p.UID = types.UID(p.Name)
				p.Status.Phase = corev1.PodRunning
				pods = append(pods, p)
				objs = append(objs, p)
			}
			pg := builders.GangPodGroup("ml", "w1", 2)
			pg.Spec.ParentCompositePodGroupName = ptr.To("job")
			pg.Status.Incarnation = podgroup.Record(nil, 2, pods, pods, metav1.NewTime(now.Add(-time.Minute)))
			objs = append(objs, pg)
			c := indexedClient(objs...)
			r, _ := testReconciler(c, c)
			ctx := context.Background()
			req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: "w1"}}
			for range 2 { // the first ends the incarnation, the second evicts
				if _, err := r.Reconcile(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			w1 := &lockv1.PodGroup{}
			if err := c.Get(ctx, req.NamespacedName, w1); err != nil {
				t.Fatal(err)
			}
			got := ""
			if e := w1.Status.Incarnation.Ended; e != nil {
				got = e.Reason
			}
			if got != tc.wantEnded {
				t.Errorf("w1's incarnation ended with %q, want %q", got, tc.wantEnded)
			}
			left := &corev1.PodList{}
			if err := c.List(ctx, left, client.InNamespace("ml"), client.MatchingFields{indexGroup: "w1"}); err != nil {
				t.Fatal(err)
			}
			if evicted := 2 - len(left.Items); evicted != tc.wantEvicted {
				t.Errorf("%d members of w1 evicted, want %d", evicted, tc.wantEvicted)
			}
		})
	}
}
