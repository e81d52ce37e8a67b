package podgroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

func pod(uid string, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, UID: types.UID(uid), Labels: map[string]string{lockv1.JobCompletionIndexLabel: uid}},
		Spec:       corev1.PodSpec{SchedulerName: lockv1.SchedulerName, NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func uids(inc *lockv1.PodGroupIncarnation) []string {
	var out []string
	for _, m := range inc.Members {
		out = append(out, string(m.UID))
	}
	return out
}

func TestRecord(t *testing.T) {
	now := metav1.Now()
	ended := &lockv1.PodGroupIncarnation{Number: 3, Members: []lockv1.PodGroupMember{{UID: "1"}, {UID: "2"}},
		Ended: &lockv1.PodGroupIncarnationEnd{Reason: "MemberFailed"}}
	live := &lockv1.PodGroupIncarnation{Number: 3, MinCount: 2, Members: []lockv1.PodGroupMember{{UID: "1"}, {UID: "2"}}}
	cases := map[string]struct {
		cur         *lockv1.PodGroupIncarnation
		pods, bound []*corev1.Pod
		wantNumber  int32
		wantMembers []string
	}{
		"the first admission": {
			pods: []*corev1.Pod{pod("1", "n", corev1.PodRunning), pod("2", "n", corev1.PodRunning)}, bound: []*corev1.Pod{pod("1", "n", corev1.PodRunning), pod("2", "n", corev1.PodRunning)},
			wantNumber: 1, wantMembers: []string{"1", "2"},
		},
		"after an ended incarnation: the next, without the old members still running": {
			cur:  ended,
			pods: []*corev1.Pod{pod("1", "n", corev1.PodRunning), pod("3", "n", corev1.PodRunning)}, bound: []*corev1.Pod{pod("3", "n", corev1.PodRunning)},
			wantNumber: 4, wantMembers: []string{"3"},
		},
		"a live incarnation: a resize step joins it": {
			cur:  live,
			pods: []*corev1.Pod{pod("1", "n", corev1.PodRunning), pod("2", "n", corev1.PodRunning), pod("3", "n", corev1.PodRunning)}, bound: []*corev1.Pod{pod("3", "n", corev1.PodRunning)},
			wantNumber: 3, wantMembers: []string{"1", "2", "3"},
		},
		"every member finished: new pods start the next, with the finished ranks": {
			cur:  live,
			pods: []*corev1.Pod{pod("1", "n", corev1.PodSucceeded), pod("2", "n", corev1.PodSucceeded), pod("3", "n", corev1.PodRunning)}, bound: []*corev1.Pod{pod("3", "n", corev1.PodRunning)},
			wantNumber: 4, wantMembers: []string{"3", "1", "2"},
		},
		"a new incarnation starts with the ranks already done": {
			cur:  &lockv1.PodGroupIncarnation{Number: 1, Members: []lockv1.PodGroupMember{{UID: "1", Outcome: lockv1.MemberSucceeded}, {UID: "2"}}, Ended: &lockv1.PodGroupIncarnationEnd{Reason: "NodeLost"}},
			pods: []*corev1.Pod{pod("4", "n", corev1.PodSucceeded), pod("3", "n", corev1.PodRunning)}, bound: []*corev1.Pod{pod("3", "n", corev1.PodRunning)},
			wantNumber: 2, wantMembers: []string{"3", "1", "4"},
		},
		"bound members nobody recorded (a crash) are recorded": {
			pods:       []*corev1.Pod{pod("1", "n", corev1.PodRunning), pod("2", "n", corev1.PodRunning), pod("3", "", corev1.PodPending)},
			wantNumber: 1, wantMembers: []string{"1", "2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Record(tc.cur, 2, tc.pods, tc.bound, now)
			if got.Number != tc.wantNumber {
				t.Errorf("number: want %d, got %d", tc.wantNumber, got.Number)
			}
			if diff := cmp.Diff(tc.wantMembers, uids(got)); diff != "" {
				t.Errorf("members (-want,+got):\n%s", diff)
			}
			if got.Members[0].Index == nil && len(tc.bound) > 0 && tc.cur == nil {
				t.Errorf("the member's completion index is recorded")
			}
		})
	}
}

func TestHolds(t *testing.T) {
	ended := &lockv1.PodGroupIncarnation{Number: 1, Members: []lockv1.PodGroupMember{{UID: "old"}, {UID: "done"}}, Ended: &lockv1.PodGroupIncarnationEnd{Reason: "NodeLost"}}
	going := pod("going", "n", corev1.PodRunning)
	going.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "GangRestartByLockstep"}}
	cases := map[string]struct {
		pod  *corev1.Pod
		inc  *lockv1.PodGroupIncarnation
		want bool
	}{
		"bound and running":     {pod("a", "n", corev1.PodRunning), nil, true},
		"pending":               {pod("a", "", corev1.PodPending), nil, false},
		"failed":                {pod("a", "n", corev1.PodFailed), nil, false},
		"marked for disruption": {going, nil, false},
		"a running member of an ended incarnation, unmarked": {pod("old", "n", corev1.PodRunning), ended, false},
		"a member of an ended incarnation that succeeded":    {pod("done", "n", corev1.PodSucceeded), ended, true},
		"a running pod the ended incarnation does not list":  {pod("new", "n", corev1.PodRunning), ended, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Holds(tc.pod, tc.inc); got != tc.want {
				t.Errorf("want %v, got %v", tc.want, got)
			}
		})
	}
}

func TestPriorityIsTheMembers(t *testing.T) {
	withPrio := func(uid string, p *int32) *corev1.Pod {
		pod := pod(uid, "", corev1.PodPending)
		pod.Spec.Priority = p
		return pod
	}
	ten, hundred := int32(10), int32(100)
	cases := map[string]struct {
		pods   []*corev1.Pod
		want   int32
		wantOK bool
	}{
		"no members":                         {nil, 0, false},
		"members share a priority":           {[]*corev1.Pod{withPrio("a", &hundred), withPrio("b", &hundred)}, 100, true},
		"members that differ: the lowest":    {[]*corev1.Pod{withPrio("a", &hundred), withPrio("b", &ten)}, 10, true},
		"a member without priority counts 0": {[]*corev1.Pod{withPrio("a", &hundred), withPrio("b", nil)}, 0, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Priority(tc.pods)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("want %d %v, got %d %v", tc.want, tc.wantOK, got, ok)
			}
		})
	}
}

func TestWaitingSince(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	ended := metav1.NewTime(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name string
		inc  *lockv1.PodGroupIncarnation
		want metav1.Time
	}{
		{name: "never admitted: since it was created", want: created},
		{name: "running: since it was created (it is not waiting; the caller asks only of waiting groups)", inc: &lockv1.PodGroupIncarnation{Number: 1}, want: created},
		{name: "restarted or preempted: since its incarnation ended", inc: &lockv1.PodGroupIncarnation{Number: 1, Ended: &lockv1.PodGroupIncarnationEnd{Reason: "NodeLost", Time: ended}}, want: ended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := &lockv1.PodGroup{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Status: lockv1.PodGroupStatus{Incarnation: tc.inc}}
			if got := WaitingSince(pg); !got.Equal(&tc.want) {
				t.Errorf("want %s, got %s", tc.want, got)
			}
		})
	}
}
