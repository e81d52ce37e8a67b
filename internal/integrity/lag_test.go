package integrity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// lagStep is one event with caches behind the API server, and what must
// hold after the controller has reacted to it.
type lagStep struct {
	name string
	do   func(w *world)
	// want, after decide():
	restarts    int
	reason      string
	state       string
	incarnation int32
	evictions   int
	// read: objects were read from the API server for this verdict.
	read bool
}

// TestDecideWithCachesBehind: caches that are not synced with each other
// (after an API server restart the pod informer caught up 11.7 s after the
// PodGroup's) never make a healthy gang lost, and never lead to an eviction;
// a real loss is still found, at once, by reading the API server.
func TestDecideWithCachesBehind(t *testing.T) {
	running, restarting := lockv1.RunningReasonRunning, lockv1.RunningReasonRestarting
	cases := map[string]struct {
		minCount int32
		job      bool
		steps    []lagStep
	}{
		"a running gang whose pods the pod cache does not hold (still empty after a restart) is not lost": {
			minCount: 8, job: true,
			steps: []lagStep{
				{name: "bound", do: func(w *world) { w.create(0, 8); w.bind() }, state: running, incarnation: 1},
				{name: "the pod cache misses every member past the settle window", do: func(w *world) { w.behind(); w.advance(12 * time.Second) }, state: running, incarnation: 1, read: true},
				{name: "a minute later, still behind", do: func(w *world) { w.advance(time.Minute) }, state: running, incarnation: 1, read: true},
				{name: "it catches up", do: func(w *world) { w.catchUp() }, state: running, incarnation: 1},
			},
		},
		"a gang bound while the pod informer was behind is not lost": {
			minCount: 8, job: true,
			steps: []lagStep{
				{name: "ranks created and bound, never seen by the pod cache", do: func(w *world) { w.create(0, 8); w.behind(); w.bind() }, state: running, incarnation: 1},
				{name: "the settle window ends before the pod cache catches up", do: func(w *world) { w.advance(11700 * time.Millisecond) }, state: running, incarnation: 1, read: true},
				{name: "it catches up", do: func(w *world) { w.catchUp(); w.advance(time.Second) }, state: running, incarnation: 1},
			},
		},
		"a member deleted while the pod cache was behind is lost, found by the read; the rest go once the cache sees them": {
			minCount: 4, job: true,
			steps: []lagStep{
				{name: "bound", do: func(w *world) { w.create(0, 4); w.bind() }, state: running, incarnation: 1},
				{name: "the pod cache falls behind; rank 3 is deleted meanwhile", do: func(w *world) { w.behind(); w.remove(3); w.advance(10 * time.Second) },
					restarts: 1, reason: ReasonMemberLost, state: restarting, incarnation: 1, read: true},
				{name: "the cache catches up: the three it now sees are evicted", do: func(w *world) { w.catchUp() },
					restarts: 1, reason: ReasonMemberLost, state: restarting, incarnation: 1, evictions: 3},
			},
		},
		"a real loss after the caches agree is found at once": {
			minCount: 4, job: true,
			steps: []lagStep{
				{name: "bound while the pod cache was behind", do: func(w *world) { w.create(0, 4); w.behind(); w.bind(); w.advance(10 * time.Second) }, state: running, incarnation: 1, read: true},
				{name: "it catches up", do: func(w *world) { w.catchUp() }, state: running, incarnation: 1},
				{name: "rank 2 is deleted", do: func(w *world) { w.remove(2) }, restarts: 1, reason: ReasonMemberLost, state: restarting, incarnation: 1, evictions: 3},
			},
		},
		"ranks that finish while the pod cache is behind complete the gang": {
			minCount: 2, job: true,
			steps: []lagStep{
				{name: "bound", do: func(w *world) { w.create(0, 2); w.behind(); w.bind(); w.advance(10 * time.Second) }, state: running, incarnation: 1, read: true},
				{name: "both exit 0, unseen", do: func(w *world) { w.succeed(0); w.succeed(1) }, state: lockv1.RunningReasonCompleted, incarnation: 1, read: true},
				{name: "the cache catches up", do: func(w *world) { w.catchUp() }, state: lockv1.RunningReasonCompleted, incarnation: 1},
			},
		},
		"a gang resized while the pod cache is behind keeps running": {
			minCount: 2, job: true,
			steps: []lagStep{
				{name: "2 ranks bound", do: func(w *world) { w.create(0, 2); w.bind() }, state: running, incarnation: 1},
				{name: "scaled to 4: the new ranks bind, unseen", do: func(w *world) { w.resize(4); w.create(2, 4); w.behind(); w.bind() }, state: running, incarnation: 1},
				{name: "settle window over", do: func(w *world) { w.advance(10 * time.Second) }, state: running, incarnation: 1, read: true},
				{name: "the cache catches up", do: func(w *world) { w.catchUp() }, state: running, incarnation: 1},
			},
		},
		"a node the node cache does not hold yet is not lost; deleted, it is": {
			minCount: 2, job: true,
			steps: []lagStep{
				{name: "bound", do: func(w *world) { w.create(0, 2); w.bind() }, state: running, incarnation: 1},
				{name: "the node cache misses node-1", do: func(w *world) { w.nodeCache["node-1"] = nil }, state: running, incarnation: 1, read: true},
				{name: "node-1 is deleted", do: func(w *world) { delete(w.nodes, "node-1") }, restarts: 1, reason: ReasonNodeLost, state: restarting, incarnation: 1, evictions: 2, read: true},
			},
		},
		"a node the cache shows NotReady past the grace period but Ready again is not lost": {
			minCount: 2, job: true,
			steps: []lagStep{
				{name: "bound", do: func(w *world) { w.create(0, 2); w.bind() }, state: running, incarnation: 1},
				{name: "the node cache still shows node-1 NotReady since long ago", do: func(w *world) {
					stale := w.nodes["node-1"].DeepCopy()
					stale.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(w.now.Add(-time.Minute))}
					w.nodeCache["node-1"] = stale
				}, state: running, incarnation: 1, read: true},
				{name: "node-1 really is NotReady past the grace period", do: func(w *world) {
					w.nodes["node-1"] = w.nodeCache["node-1"]
				}, restarts: 1, reason: ReasonNodeLost, state: restarting, incarnation: 1, evictions: 2, read: true},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.minCount, tc.job)
			for _, s := range tc.steps {
				s.do(w)
				reads := w.reads
				w.decide()
				got := lagStep{name: s.name, restarts: len(w.restarts), state: w.state(), incarnation: w.incarnation(), evictions: w.evictions, read: w.reads > reads}
				if len(w.restarts) > 0 {
					got.reason = w.restarts[len(w.restarts)-1].Reason
				}
				want := s
				want.do = nil
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(lagStep{})); diff != "" {
					t.Fatalf("after %q (-want,+got):\n%s\nconditions: %+v", s.name, diff, w.pg.Status.Conditions)
				}
			}
		})
	}
}

// TestDecideAloneNeverJudgesWhatTheCacheMisses: on the caches alone, a
// member the pod cache does not hold past the settle window makes the
// verdict a request to confirm and nothing else — no condition, record,
// restart or eviction — whoever calls Decide.
func TestDecideAloneNeverJudgesWhatTheCacheMisses(t *testing.T) {
	w := newWorld(t, 4, true)
	w.create(0, 4)
	w.bind()
	w.unseen[w.rank(1).Name] = true
	w.nodeCache["node-2"] = nil
	w.advance(time.Minute)
	got := Decide(w.view())
	want := Verdict{Confirm: &Confirm{Pods: []lockv1.PodGroupMember{w.pg.Status.Incarnation.Members[1]}, Nodes: []string{"node-2"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decide (-want,+got):\n%s", diff)
	}
}
