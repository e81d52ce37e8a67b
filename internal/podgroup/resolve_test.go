package podgroup

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

func TestResolve(t *testing.T) {
	gang := func(min int32) *lockv1.PodGroup {
		return &lockv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
			Spec: lockv1.PodGroupSpec{SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: min}}}}
	}
	member := func(uid, node string, phase corev1.PodPhase) *corev1.Pod {
		p := pod(uid, node, phase)
		p.Namespace, p.Labels[lockv1.PodGroupLabel] = "ns", "g"
		return p
	}
	gated := member("gated", "", corev1.PodPending)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	// Kueue holds a group's pods with its admission gate (and, with
	// topology-aware scheduling, its topology gate).
	kueueGated := func(uid string, gates ...string) *corev1.Pod {
		p := member(uid, "", corev1.PodPending)
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	queued := func(uid string) *corev1.Pod {
		p := kueueGated(uid, "kueue.x-k8s.io/admission")
		p.Labels[KueueQueueLabel] = "team"
		return p
	}
	clusterQueues := func(ns, name string) (string, error) {
		if ns == "ns" && name == "team" {
			return "gpus", nil
		}
		return "", apierrors.NewNotFound(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "localqueues"}, name)
	}
	other := member("other-ns", "", corev1.PodPending)
	other.Namespace = "elsewhere"
	foreign := member("kube", "", corev1.PodPending)
	foreign.Spec.SchedulerName = "default-scheduler"
	withClaims := gang(2)
	withClaims.Spec.ResourceClaims = []lockv1.PodGroupResourceClaim{{Name: "shared", ResourceClaimName: ptr.To("c")}}
	assumedPod := member("assumed", "", corev1.PodPending)
	isAssumed := func(p *corev1.Pod) (string, bool) { return "n1", p == assumedPod }

	cases := map[string]struct {
		pg          *lockv1.PodGroup
		pods        []*corev1.Pod
		wantPending []string
		wantBound   int
		wantGated   int
		wantMembers int
		wantWaiting string // substring; "" means the unit can be attempted
		wantReason  string
		opts        []Option
	}{
		"a full gang is attempted": {
			pg: gang(2), pods: []*corev1.Pod{member("b", "", corev1.PodPending), member("a", "", corev1.PodPending)},
			wantPending: []string{"p-a", "p-b"}, wantMembers: 2,
		},
		"a gang short of minCount waits for pods": {
			pg: gang(3), pods: []*corev1.Pod{member("a", "", corev1.PodPending), member("b", "n", corev1.PodRunning)},
			wantPending: []string{"p-a"}, wantBound: 1, wantMembers: 2, wantWaiting: "waiting for pods: fewer than minCount 3",
		},
		"a gang held by Kueue names its gates, once each": {
			pg: gang(3), pods: []*corev1.Pod{kueueGated("a", "kueue.x-k8s.io/topology", "kueue.x-k8s.io/admission"), kueueGated("b", "kueue.x-k8s.io/admission"), kueueGated("c", "kueue.x-k8s.io/admission")},
			wantGated: 3, wantMembers: 3, wantReason: lockv1.PodGroupReasonSchedulingGated,
			wantWaiting: "3 members are gated (spec.schedulingGates: kueue.x-k8s.io/admission, kueue.x-k8s.io/topology); none is placed until minCount 3 are ungated",
		},
		"a gang Kueue holds in a LocalQueue says so, naming the queue": {
			pg: gang(2), pods: []*corev1.Pod{queued("a"), queued("b")},
			wantGated: 2, wantMembers: 2, wantReason: lockv1.PodGroupReasonSchedulingGated,
			wantWaiting: "waiting for Kueue admission in LocalQueue ns/team: 2 members are gated (spec.schedulingGates: kueue.x-k8s.io/admission); none is placed until minCount 2 are ungated",
		},
		"a gang Kueue holds names the ClusterQueue its LocalQueue feeds": {
			pg: gang(2), pods: []*corev1.Pod{queued("a"), queued("b")}, opts: []Option{WithClusterQueues(clusterQueues)},
			wantGated: 2, wantMembers: 2, wantReason: lockv1.PodGroupReasonSchedulingGated,
			wantWaiting: "waiting for Kueue admission in ClusterQueue gpus (LocalQueue ns/team): 2 members are gated (spec.schedulingGates: kueue.x-k8s.io/admission); none is placed until minCount 2 are ungated",
		},
		"a group whose pods Kueue holds, none pending": {
			pg: gang(1), pods: []*corev1.Pod{queued("a"), queued("b"), member("c", "n", corev1.PodRunning)}, opts: []Option{WithClusterQueues(clusterQueues)},
			wantBound: 1, wantGated: 2, wantMembers: 3, wantReason: lockv1.PodGroupReasonSchedulingGated,
			wantWaiting: "waiting for Kueue admission in ClusterQueue gpus (LocalQueue ns/team): 2 members are gated",
		},
		"a gang whose members are gated waits whole, naming them": {
			pg: gang(2), pods: []*corev1.Pod{member("a", "", corev1.PodPending), gated},
			wantPending: []string{"p-a"}, wantGated: 1, wantMembers: 2, wantWaiting: "1 members are gated (spec.schedulingGates: example.com/wait)", wantReason: lockv1.PodGroupReasonSchedulingGated,
		},
		"bound, succeeded and assumed members count; a failed one does not": {
			pg: gang(4), pods: []*corev1.Pod{member("a", "n", corev1.PodRunning), member("s", "n", corev1.PodSucceeded), member("f", "n", corev1.PodFailed), assumedPod, member("p", "", corev1.PodPending)},
			wantPending: []string{"p-p"}, wantBound: 3, wantMembers: 4,
		},
		"pods of other namespaces and schedulers are not members": {
			pg: gang(1), pods: []*corev1.Pod{other, foreign, member("a", "", corev1.PodPending)},
			wantPending: []string{"p-a"}, wantMembers: 1,
		},
		"a group that does not exist: its pods wait for it": {
			pods: []*corev1.Pod{member("a", "", corev1.PodPending)}, wantPending: []string{"p-a"}, wantMembers: 1, wantWaiting: "PodGroup ns/g does not exist yet",
		},
		"group-level claims are refused, not ignored": {
			pg: withClaims, pods: []*corev1.Pod{member("a", "", corev1.PodPending), member("b", "", corev1.PodPending)},
			wantPending: []string{"p-a", "p-b"}, wantMembers: 2, wantWaiting: "spec.resourceClaims",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := Resolve(tc.pg, "ns", "g", tc.pods, isAssumed, tc.opts...)
			var pending []string
			for _, p := range u.Pending {
				pending = append(pending, p.Name)
			}
			if strings.Join(pending, ",") != strings.Join(tc.wantPending, ",") || u.Bound != tc.wantBound || u.Gated != tc.wantGated || len(u.Members) != tc.wantMembers {
				t.Errorf("pending %v bound %d gated %d members %d; want %v, %d, %d, %d", pending, u.Bound, u.Gated, len(u.Members), tc.wantPending, tc.wantBound, tc.wantGated, tc.wantMembers)
			}
			if tc.wantWaiting == "" && u.Waiting != "" || !strings.Contains(u.Waiting, tc.wantWaiting) {
				t.Errorf("waiting %q, want %q", u.Waiting, tc.wantWaiting)
			}
			if u.WaitReason != tc.wantReason {
				t.Errorf("wait reason %q, want %q", u.WaitReason, tc.wantReason)
			}
		})
	}
}

func TestResolvePod(t *testing.T) {
	pending, bound := pod("a", "", corev1.PodPending), pod("b", "n", corev1.PodRunning)
	gated := pod("c", "", corev1.PodPending)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "x"}}
	if u := ResolvePod(pending, nil); len(u.Pending) != 1 || u.Waiting != "" {
		t.Errorf("a pending pod: %+v", u)
	}
	if u := ResolvePod(pending, func(*corev1.Pod) (string, bool) { return "n", true }); len(u.Pending) != 0 || u.Bound != 1 || len(u.Placed) != 1 || u.Placed[0].Node != "n" {
		t.Errorf("an assumed pod is not placed again, and holds its node: %+v", u)
	}
	if u := ResolvePod(bound, nil); len(u.Pending) != 0 || u.Bound != 1 {
		t.Errorf("a bound pod: %+v", u)
	}
	if u := ResolvePod(gated, nil); len(u.Pending) != 0 || u.Gated != 1 || u.WaitReason != lockv1.PodGroupReasonSchedulingGated {
		t.Errorf("a gated pod: %+v", u)
	}
}
