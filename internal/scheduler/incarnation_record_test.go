package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// The incarnation records the minCount its members were admitted with: a
// resize that raises the group's minCount (4 → 40) while they are being
// bound must not be written into the incarnation, or the integrity
// controller would find "only 4 of minCount 40 members running" and
// restart a healthy gang (CI: lifecycle TestResizeGangJob).
func TestIncarnationRecordsTheAdmittedMinCount(t *testing.T) {
	admitted := builders.GangPodGroup("ml", "elastic", 4)
	f := newFixture(t, twoNodes, objects(gpuPods("ml", "elastic", "elastic", 4, 0), []runtime.Object{admitted})...)
	var pods []*corev1.Pod
	for _, n := range []string{"elastic-0", "elastic-1", "elastic-2", "elastic-3"} {
		pods = append(pods, f.pod("ml", n))
	}
	// The Job is resized to 40 before the binding's status write.
	u, err := f.dyn.Resource(podgroup.Resource).Namespace("ml").Get(f.ctx, "elastic", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, int64(40), "spec", "schedulingPolicy", "gang", "minCount"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(podgroup.Resource).Namespace("ml").Update(f.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	g := &group{key: queue.GroupKey("ml", "elastic"), Unit: &podgroup.Unit{Group: admitted, Pods: pods, Members: pods}}
	f.s.recordIncarnation(f.ctx, g, pods)
	inc := f.group("ml", "elastic").Status.Incarnation
	if inc == nil || inc.MinCount != 4 || len(inc.Members) != 4 {
		t.Fatalf("incarnation %+v, want minCount 4 (admitted) with 4 members", inc)
	}
	if got := podgroup.MinCount(f.group("ml", "elastic")); got != 40 {
		t.Fatalf("group minCount %d, want the resize's 40", got)
	}
}
