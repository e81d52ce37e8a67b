package scheduler

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/lockstep-dev/lockstep/test/builders"
)

// The writer coalesces: of several wishes for a pod before a worker takes
// it, only the last is written; a wish the pod already shows, or that was
// already asked for, is no news and writes nothing; a forgotten pod may be
// asked again.
func TestPodStatusWriterCoalesces(t *testing.T) {
	p := builders.MakePod().Namespace("ml").Name("p").Obj()
	p.UID = "p"
	client := fake.NewClientset(p)
	w := newPodStatusWriter(client, testingclock.NewFakePassiveClock(time.Unix(1e9, 0)))
	if !w.set(p, corev1.PodReasonUnschedulable, "first", "") || !w.set(p, corev1.PodReasonUnschedulable, "second", "n1") {
		t.Fatal("a new wish was not news")
	}
	if w.set(p, corev1.PodReasonUnschedulable, "second", "n1") {
		t.Error("the same wish twice was news")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx)
	w.idle()
	writes := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			writes++
		}
	}
	if writes != 1 {
		t.Errorf("%d writes, want 1 (the last wish)", writes)
	}
	got, err := client.CoreV1().Pods("ml").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NominatedNodeName != "n1" || podScheduled(got) != "False/Unschedulable: second" {
		t.Errorf("pod shows %q nominated to %q; want the last wish", podScheduled(got), got.Status.NominatedNodeName)
	}
	if w.set(got, corev1.PodReasonUnschedulable, "second", "n1") {
		t.Error("a wish the pod shows was news")
	}
	w.forget(p.UID)
	if !w.set(p, corev1.PodReasonUnschedulable, "second", "n1") {
		t.Error("after forget, the pod (as the cache had it) could not be asked again")
	}
}
