package scheduler

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

func prioPod(name, group string, prio int32) *corev1.Pod {
	p := builders.MakePod().Namespace("ml").Name(name).Scheduler(lockv1.SchedulerName).Member(group).Obj()
	p.Spec.Priority = ptr.To(prio)
	return p
}

// A group's remembered priority is what podgroup.Priority gives for its
// members at every step: members joining and leaving, above, at and below
// the lowest, and pods that are not Lockstep's.
func TestGroupPrioritiesFollowMembers(t *testing.T) {
	type step struct {
		join  *corev1.Pod
		leave *corev1.Pod
	}
	other := prioPod("other", "g", -100)
	other.Spec.SchedulerName = "default-scheduler"
	for _, tc := range []struct {
		name    string
		members []*corev1.Pod
		steps   []step
	}{
		{"a member joins below the lowest", []*corev1.Pod{prioPod("a", "g", 10)},
			[]step{{join: prioPod("b", "g", 5)}}},
		{"members join at and above the lowest", []*corev1.Pod{prioPod("a", "g", 10)},
			[]step{{join: prioPod("b", "g", 10)}, {join: prioPod("c", "g", 20)}}},
		{"one of two at the lowest leaves", []*corev1.Pod{prioPod("a", "g", 10), prioPod("b", "g", 10), prioPod("c", "g", 20)},
			[]step{{leave: prioPod("a", "g", 10)}}},
		{"the last at the lowest leaves", []*corev1.Pod{prioPod("a", "g", 5), prioPod("b", "g", 10)},
			[]step{{leave: prioPod("a", "g", 5)}}},
		{"a member above the lowest leaves", []*corev1.Pod{prioPod("a", "g", 5), prioPod("b", "g", 10)},
			[]step{{leave: prioPod("b", "g", 10)}}},
		{"a gang of one priority leaves one by one", []*corev1.Pod{prioPod("a", "g", 7), prioPod("b", "g", 7), prioPod("c", "g", 7)},
			[]step{{leave: prioPod("a", "g", 7)}, {leave: prioPod("b", "g", 7)}, {join: prioPod("d", "g", 9)}}},
		{"the first member joins an empty group", nil,
			[]step{{join: prioPod("a", "g", 3)}, {join: prioPod("b", "g", 1)}}},
		{"another scheduler's pod does not count", []*corev1.Pod{prioPod("a", "g", 10)},
			[]step{{join: other}, {leave: other}}},
		{"a pod of another group does not count", []*corev1.Pod{prioPod("a", "g", 10)},
			[]step{{join: prioPod("x", "h", 1)}, {leave: prioPod("x", "h", 1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := append([]*corev1.Pod(nil), tc.members...)
			list := func() []*corev1.Pod {
				var out []*corev1.Pod
				for _, m := range members {
					if m.Labels[lockv1.PodGroupLabel] == "g" {
						out = append(out, m)
					}
				}
				return out
			}
			var g groupPriorities
			key := types.NamespacedName{Namespace: "ml", Name: "g"}
			check := func(when string) {
				t.Helper()
				want := lowestPriority(list()).prio
				if got := g.get(key, list); got != want {
					t.Errorf("%s: priority %d, want %d", when, got, want)
				}
			}
			check("at first")
			for i, s := range tc.steps {
				if s.join != nil {
					members = append(members, s.join)
					g.joined(s.join)
				}
				if s.leave != nil {
					for j, m := range members {
						if m.Name == s.leave.Name {
							members = append(members[:j], members[j+1:]...)
							break
						}
					}
					g.left(s.leave, s.leave.Labels[lockv1.PodGroupLabel])
				}
				check(fmt.Sprintf("after step %d", i))
			}
		})
	}
}

// The members are read once, not at each of their events: a gang created
// member by member costs one read of its members, not one per member.
func TestGroupPrioritiesReadMembersOnce(t *testing.T) {
	var members []*corev1.Pod
	reads := 0
	list := func() []*corev1.Pod { reads++; return members }
	var g groupPriorities
	key := types.NamespacedName{Namespace: "ml", Name: "g"}
	for i := 0; i < 100; i++ {
		p := prioPod(fmt.Sprintf("m-%d", i), "g", 0)
		members = append(members, p)
		g.joined(p)
		if got := g.get(key, list); got != 0 {
			t.Fatalf("priority %d, want 0", got)
		}
	}
	for _, p := range members[:99] {
		g.left(p, "g")
		if got := g.get(key, list); got != 0 {
			t.Fatalf("priority %d, want 0", got)
		}
	}
	if reads != 1 {
		t.Errorf("members read %d times, want once", reads)
	}
}

// A read that a join or leave overlapped is answered but not kept: what
// it read may miss the member.
func TestGroupPrioritiesDropAReadAChangeOverlapped(t *testing.T) {
	var g groupPriorities
	key := types.NamespacedName{Namespace: "ml", Name: "g"}
	low := prioPod("low", "g", 1)
	stale := func() []*corev1.Pod {
		// The cache as it was before low arrived; low's handler runs
		// while this read is under way.
		g.joined(low)
		return []*corev1.Pod{prioPod("a", "g", 10)}
	}
	g.get(key, stale)
	if got := g.get(key, func() []*corev1.Pod { return []*corev1.Pod{prioPod("a", "g", 10), low} }); got != 1 {
		t.Errorf("priority %d after an overlapped read, want 1 (the read was kept)", got)
	}
}

// Through the scheduler's informers: a unit's order follows a member of
// lower priority joining its group and leaving it.
func TestUnitOrderFollowsItsMembersPriority(t *testing.T) {
	objs := append([]runtime.Object{builders.GangPodGroup("ml", "g", 2)}, gpuPods("ml", "g", "g", 2, 10)...)
	f := newFixture(t, twoNodes, objs...)
	k := queue.GroupKey("ml", "g")
	prio := func() int32 { p, _ := f.s.order(k); return p }
	if got := prio(); got != 10 {
		t.Fatalf("priority %d, want its members' 10", got)
	}
	low := prioPod("low", "g", 1)
	if _, err := f.s.client.CoreV1().Pods("ml").Create(context.Background(), low, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the unit ordered at its new member's priority 1", func() bool { return prio() == 1 })
	if err := f.s.client.CoreV1().Pods("ml").Delete(context.Background(), low.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the unit ordered at 10 again", func() bool { return prio() == 10 })
}
