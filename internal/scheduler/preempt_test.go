package scheduler

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A preemptor waits for the victims it chose while anything they held
// still holds devices — their claims still allocated after
// kube-controller-manager cleared the victims' reservations — and never
// plans a second preemption elsewhere meanwhile; once the claims are gone
// it binds where its victims were.
func TestPreemptorWaitsForWhatItsVictimsHeld(t *testing.T) {
	var objs []runtime.Object
	for i, name := range []string{"a", "b"} {
		pods := running(gpuPods("batch", name, name, 2, 10), []string{"gpu-0", "gpu-1"}[i], 0)
		g := builders.GangPodGroup("batch", name, 2)
		g.Status.Incarnation = &lockv1.PodGroupIncarnation{Number: 1, MinCount: 2, Members: []lockv1.PodGroupMember{
			{Name: name + "-0", UID: types.UID("batch-" + name + "-0")}, {Name: name + "-1", UID: types.UID("batch-" + name + "-1")}}}
		objs = append(objs, pods...)
		objs = append(objs, g)
	}
	objs = append(objs, gpuPods("ml", "urgent", "urgent", 2, 100)...)
	objs = append(objs, builders.GangPodGroup("ml", "urgent", 2))
	f := newFixture(t, twoNodes, objs...)
	k := queue.GroupKey("ml", "urgent")
	f.run(k)

	evicted := only(f.writes(), "delete pods")
	if len(evicted) != 2 {
		t.Fatalf("first cycle evicted %v, want one gang of 2", evicted)
	}
	victim, other := "a", "b"
	if strings.Contains(evicted[0], "batch/b-") {
		victim, other = "b", "a"
	}
	node := map[string]string{"a": "gpu-0", "b": "gpu-1"}[victim]
	// kube-controller-manager clears the victims' reservations; their
	// claims stay allocated a while before they are deleted.
	for i := 0; i < 2; i++ {
		c := f.claim("batch", fmt.Sprintf("%s-%d-gpu", victim, i)).DeepCopy()
		c.Status.ReservedFor = nil
		if _, err := f.client.ResourceV1().ResourceClaims("batch").UpdateStatus(f.ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.waitFor("the victims gone and their claims unreserved", func() bool {
		for i := 0; i < 2; i++ {
			n := victim + "-" + string(rune('0'+i))
			if _, err := f.s.listers.pods.Pods("batch").Get(n); err == nil {
				return false
			}
			if c, err := f.s.listers.claims.ResourceClaims("batch").Get(n + "-gpu"); err != nil || len(c.Status.ReservedFor) != 0 {
				return false
			}
		}
		return true
	})
	f.client.ClearActions()
	f.run(k)
	if w := only(f.writes(), "delete pods"); len(w) != 0 {
		t.Errorf("while the victims' claims still held their devices, a second preemption evicted %v", w)
	}
	if f.s.state.Cache.Nomination(k.String()) == nil {
		t.Error("the nomination was dropped while the victims' claims still held their devices")
	}

	for i := 0; i < 2; i++ {
		if err := f.client.ResourceV1().ResourceClaims("batch").Delete(f.ctx, fmt.Sprintf("%s-%d-gpu", victim, i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.waitFor("the victims' claims gone from the cache", func() bool {
		_, err := f.s.listers.claims.ResourceClaims("batch").Get(victim + "-0-gpu")
		_, err1 := f.s.listers.claims.ResourceClaims("batch").Get(victim + "-1-gpu")
		return err != nil && err1 != nil
	})
	f.client.ClearActions()
	f.run(k)
	writes := f.writes()
	if w := only(writes, "delete pods"); len(w) != 0 {
		t.Errorf("evicted %v after the victims went", w)
	}
	if w := only(writes, "pods/binding"); len(w) != 2 {
		t.Errorf("bindings %v, want the 2 urgent pods", w)
	}
	for _, n := range []string{"urgent-0", "urgent-1"} {
		if p := f.pod("ml", n); p.Spec.NodeName != node {
			t.Errorf("%s on %q, want %s where the victims were", n, p.Spec.NodeName, node)
		}
	}
	for _, n := range []string{other + "-0", other + "-1"} {
		if p := f.pod("batch", n); p.Spec.NodeName == "" {
			t.Errorf("%s of the gang that was not chosen lost its node", n)
		}
	}
}

// Whether a preemption is still under way is judged before the cycle's
// snapshot, never after: a victim that goes between the two is gone from a
// later look but still holds its devices in the snapshot the unit did not
// fit in, and judging then would plan a second preemption (CI: two racks
// evicted for one gang).
func TestNominationIsJudgedBeforeTheSnapshot(t *testing.T) {
	objs := running(gpuPods("batch", "", "low", 2, 10), "gpu-0", 0)
	objs = append(objs, gpuPods("ml", "urgent", "urgent", 2, 100)...)
	objs = append(objs, builders.GangPodGroup("ml", "urgent", 2))
	f := newFixture(t, oneNode, objs...)
	k := queue.GroupKey("ml", "urgent")
	f.run(k)
	if n := len(only(f.writes(), "delete pods")); n != 2 {
		t.Fatalf("%d pods evicted, want the 2 low ones", n)
	}
	// The victims' claims still hold their devices when the cycle looks…
	nc := f.s.checkNomination(k)
	if len(nc.left) != 2 {
		t.Fatalf("%d victims left before their claims went, want 2", len(nc.left))
	}
	// …and are gone by the time the unit, not fitting in its snapshot,
	// asks what it may preempt.
	for i := 0; i < 2; i++ {
		if err := f.client.ResourceV1().ResourceClaims("batch").Delete(f.ctx, fmt.Sprintf("low-%d-gpu", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.waitFor("the victims' claims gone", func() bool {
		return len(f.s.victimsLeft(f.s.state.Cache.Nomination(k.String()))) == 0
	})
	u, err := f.s.resolve(k)
	if err != nil || u == nil {
		t.Fatalf("resolving the unit: %v", err)
	}
	p, err := f.s.preemptionInput(f.ctx, u, 0, nc)
	if err != nil {
		t.Fatal(err)
	}
	if p.InProgress == "" {
		t.Errorf("judged after the victims went: a new search over %d candidates instead of waiting for the snapshot to show them gone", len(p.Candidates))
	}
	if f.s.state.Cache.Nomination(k.String()) == nil {
		t.Error("the nomination was dropped")
	}
	// The next cycle looks again, sees nothing left, and binds.
	f.client.ClearActions()
	f.run(k)
	if w := only(f.writes(), "pods/binding"); len(w) != 2 {
		t.Errorf("bindings %v, want the 2 urgent pods", w)
	}
}
