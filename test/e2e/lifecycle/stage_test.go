package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// The simulated kubelet writes a pod's status only while it is that pod, as
// a kubelet does (by uid): a pod stopped, deleted and recreated under the
// same name — an MPI or training-operator worker after a gang restart —
// is left alone by what the simulator had queued for the pod before it. It
// was not: kwok keys its queue by name, and a new, unbound MPI worker was
// once turned Failed, so the operator never replaced it and its gang waited
// for ever. Here kwok is paused with a stage due for the old pod, the pod is
// replaced, and kwok resumes after the stage was due.
//
// On resuming, kwok may see the old pod's deletion before it plays the stage
// (then it drops the stage, and the attempt shows nothing): the test tries
// again, under another name, until kwok's log shows the stale stage played
// and refused, and fails if it never does.
func TestSimulatorLeavesAPodOfTheSameNameAlone(t *testing.T) {
	h := harness.Get(t)
	if h.Cluster == nil {
		t.Fatal("this test pauses kwok: it needs a cluster the harness started, not LOCKSTEP_E2E_KUBECONFIG's")
	}
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	nodes, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no node to run on: %v", err)
	}
	const attempts = 3
	for i := range attempts {
		if replacePodUnderKwok(t, ctx, h, ns, fmt.Sprintf("worker-%d", i), nodes.Items[0].Name) {
			return
		}
		t.Logf("attempt %d: kwok dropped the old pod's stage before playing it; again", i+1)
	}
	t.Fatalf("in %d attempts kwok never played a stage of a replaced pod: the test did not exercise the race", attempts)
}

// replacePodUnderKwok runs one attempt: it fails the test if the old pod's
// stage lands on the new pod, and reports whether kwok played it (and was
// refused, as its log says).
func replacePodUnderKwok(t *testing.T, ctx context.Context, h *harness.Harness, ns, name, node string) (played bool) {
	t.Helper()
	const due = 3 * time.Second
	old := builders.MakePod().Namespace(ns).Name(name).Node(node).Req(corev1.ResourceCPU, "1").
		Annotation("sim.lockstep.dev/fail-after", due.String()).Obj()
	old, err := h.Client.CoreV1().Pods(ns).Create(ctx, old, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the first pod running", func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase), nil
	})
	started := time.Now()   // its fail-after stage is due 3s after it started
	time.Sleep(time.Second) // for kwok to have queued it

	resume := h.PauseComponent(t, "kwok")
	defer resume()
	if err := h.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the first pod gone", func(ctx context.Context) (bool, string, error) {
		_, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there", nil
	})
	// Its successor is scheduled by no one: it stays Pending, on no node.
	next, err := h.Client.CoreV1().Pods(ns).Create(ctx, builders.MakePod().Namespace(ns).Name(name).Scheduler("no-scheduler").Req(corev1.ResourceCPU, "1").Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(started.Add(due + 2*time.Second)))
	resume()

	// Whatever kwok had queued for the first pod is played now, at once;
	// give it a few seconds to land if it were to.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.UID != next.UID {
			t.Fatalf("the pod %s was replaced again (uid %s, want %s)", name, p.UID, next.UID)
		}
		if p.Status.Phase != corev1.PodPending || len(p.Status.ContainerStatuses) > 0 {
			t.Fatalf("the simulator wrote the first pod's status (uid %s) on its successor (uid %s): phase %s, %d container statuses", old.UID, next.UID, p.Status.Phase, len(p.Status.ContainerStatuses))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, l := range strings.Split(h.Cluster.LogLines("kwok", ns+"/"+name, 50), "\n") {
		if strings.Contains(l, "failed to apply stage") && strings.Contains(l, string(old.UID)) && strings.Contains(l, "metadata.uid") {
			return true
		}
	}
	return false
}
