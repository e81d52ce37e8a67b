package integrity

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// perIndexBackoff gives the Job the Job controller's per-index pod-failure
// backoff: after a gang restart each index waits 10 s (doubling per restart
// of that index), instead of the Job-wide 10 s doubling per failed pod — 80 s
// for the 4 members of one restart, the 10 min cap from 7 members up.
func perIndexBackoff(job *batchv1.Job) {
	job.Spec.BackoffLimit = nil
	job.Spec.BackoffLimitPerIndex = ptr.To[int32](0)
}

// TestNodeLossRequeuesWholeGPUGang deletes the node of a running 4-rank GPU
// gang: the gang is restarted whole (reason NodeLost) and placed whole again
// on the remaining nodes — the members on the deleted node, which no kubelet
// stops, must not hold the gang or their devices — and stays placed.
//
// The package cluster (3 nodes × 2 GPUs) has exactly 4 GPUs left once a node
// is gone, so the gang only fits again if every device of the old members is
// released. The node is put back when the test ends.
func TestNodeLossRequeuesWholeGPUGang(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	before := gangJob(t, ctx, h, ns, perIndexBackoff)

	lost := busiestNode(before)
	deleteNode(t, ctx, h, lost)
	start := time.Now()

	var now map[types.UID]string
	harness.Eventually(t, ctx, "the whole gang placed again on the remaining nodes", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if _, old := before[p.UID]; old {
				return false, fmt.Sprintf("original rank %s still exists (phase %s, node %s)", p.Name, p.Status.Phase, p.Spec.NodeName), nil
			}
		}
		now = runningPods(ctx, h, ns)
		return len(now) == 4, fmt.Sprintf("%d new ranks running", len(now)), nil
	})
	t.Logf("gang running again %s after node %s was deleted", time.Since(start).Round(time.Second), lost)

	// A replacement gang restarted as soon as it is placed (e.g. for a member
	// of the old gang still present) would show here: hold for longer than the
	// integrity controller's settle delay.
	time.Sleep(7 * time.Second)
	if again := runningPods(ctx, h, ns); !sameKeys(again, now) {
		t.Fatalf("the replacement gang did not stay placed: running %v, then %v", now, again)
	}
	for uid, node := range now {
		if node == lost {
			t.Errorf("rank %s runs on the deleted node %s", uid, node)
		}
	}
	assertDevicesHeldByBoundPods(t, ctx, h, ns, lost)

	pg, err := h.PodGroup(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.DisruptionTarget); c == nil || c.Status != metav1.ConditionTrue || c.Reason != integrity.ReasonNodeLost {
		t.Errorf("PodGroup: want condition DisruptionTarget=True reason %s (and no later restart), got %+v", integrity.ReasonNodeLost, c)
	}
	job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, jc := range job.Status.Conditions {
		if jc.Type == batchv1.JobFailed && jc.Status == corev1.ConditionTrue {
			t.Errorf("the gang restart failed the Job: %s", jc.Message)
		}
	}
}

// busiestNode returns the node that runs the most ranks.
func busiestNode(ranks map[types.UID]string) string {
	count := map[string]int{}
	best := ""
	for _, n := range ranks {
		count[n]++
		if best == "" || count[n] > count[best] || count[n] == count[best] && n < best {
			best = n
		}
	}
	return best
}

func sameKeys(a, b map[types.UID]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// deleteNode deletes a node as a cloud provider does when its instance is
// gone, and recreates it when the test ends (the simulator makes it Ready
// again; its ResourceSlice, which nothing removes here, is still there), so
// the package's other tests have the whole cluster.
func deleteNode(t *testing.T, ctx context.Context, h *harness.Harness, name string) {
	t.Helper()
	node, err := h.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		back := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels, Annotations: node.Annotations},
			Spec:       node.Spec,
			Status:     corev1.NodeStatus{Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable},
		}
		if _, err := h.Client.CoreV1().Nodes().Create(ctx, back, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("recreating node %s: %v", name, err)
			return
		}
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			n, err := h.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Errorf("recreated node %s never became Ready", name)
		}
	})
	if err := h.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// assertDevicesHeldByBoundPods checks that every allocated claim in ns is
// reserved only for pods bound to a live node, and that none holds a device
// of the deleted node's pool.
func assertDevicesHeldByBoundPods(t *testing.T, ctx context.Context, h *harness.Harness, ns, deleted string) {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := map[types.UID]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			bound[p.UID] = p.Spec.NodeName
		}
	}
	deletedPools := map[string]bool{}
	slices, err := h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		if ptr.Deref(s.Spec.NodeName, "") == deleted {
			deletedPools[s.Spec.Driver+"/"+s.Spec.Pool.Name] = true
		}
	}
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocated := 0
	for _, c := range claims.Items {
		a := c.Status.Allocation
		if a == nil {
			continue
		}
		allocated++
		if len(c.Status.ReservedFor) == 0 {
			t.Errorf("claim %s holds a device but is reserved for no pod", c.Name)
		}
		for _, r := range c.Status.ReservedFor {
			if node, ok := bound[r.UID]; !ok || node == deleted {
				t.Errorf("claim %s holds a device for pod %s, which is not bound to a live node", c.Name, r.Name)
			}
		}
		for _, res := range a.Devices.Results {
			if deletedPools[res.Driver+"/"+res.Pool] {
				t.Errorf("claim %s holds device %s/%s of the deleted node", c.Name, res.Pool, res.Device)
			}
		}
	}
	if allocated != 4 {
		t.Errorf("want 4 allocated claims (one per rank), got %d", allocated)
	}
}
