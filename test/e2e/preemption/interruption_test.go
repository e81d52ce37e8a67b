package preemption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestSpotInterruptionNotice: a node of a running gang gets the Spot
// interruption taint the AWS Node Termination Handler sets. A gang that
// asked for notice is marked PreemptionPending naming the node, keeps
// running until it acknowledges, then restarts whole (incarnation 2) on
// the other nodes; a gang that asked for none restarts whole at once.
func TestSpotInterruptionNotice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		notice string
	}{{"with notice", "10m"}, {"without notice", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, 4*time.Minute)
			priorityClasses(t, ctx, h)
			var ann map[string]string
			if tc.notice != "" {
				ann = map[string]string{lockv1.PreemptionNoticeAnnotation: tc.notice}
			}
			gangJob(t, ctx, h, ns, "spot", 2, draGPU, classLow, ann, nil)
			before := waitRunning(t, ctx, h, ns, "spot", 2)
			pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=spot"})
			if err != nil {
				t.Fatal(err)
			}
			node := ""
			for _, p := range pods.Items {
				if _, ok := before[p.UID]; ok {
					node = p.Spec.NodeName
				}
			}
			const taint = "aws-node-termination-handler/spot-itn"
			setTaint(t, ctx, h, node, taint, true)
			t.Cleanup(func() { setTaint(t, context.Background(), h, node, taint, false) })

			if tc.notice != "" {
				harness.Eventually(t, ctx, "the gang's PreemptionPending condition naming the node", func(ctx context.Context) (bool, string, error) {
					pg, err := h.PodGroup(ctx, ns, "spot")
					if err != nil {
						return false, "", err
					}
					c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PreemptionPending)
					return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "Node "+node+" is being interrupted (taint "+taint+")"), fmt.Sprintf("%+v", c), nil
				})
				time.Sleep(3 * time.Second)
				if n := stillRunning(t, ctx, h, ns, "spot", before); n != 2 {
					t.Fatalf("%d of 2 ranks run under notice, want 2", n)
				}
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, lockv1.CheckpointedAtAnnotation, time.Now().UTC().Format(time.RFC3339))
				if _, err := h.Dynamic.Resource(podgroup.Resource).Namespace(ns).Patch(ctx, "spot", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			harness.Eventually(t, ctx, "the gang restarted whole off the interrupted node", func(ctx context.Context) (bool, string, error) {
				pg, err := h.PodGroup(ctx, ns, "spot")
				if err != nil {
					return false, "", err
				}
				inc := pg.Status.Incarnation
				running, _, err := ranks(ctx, h, ns, "spot")
				if err != nil || inc == nil || inc.Number < 2 || len(running) != 2 {
					return false, fmt.Sprintf("incarnation %+v, %d running", inc, len(running)), err
				}
				for uid := range running {
					if _, old := before[uid]; old {
						return false, "an old rank still runs", nil
					}
				}
				return true, "", nil
			})
			pods, err = h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=spot"})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Spec.NodeName == node {
					t.Errorf("rank %s placed again on the interrupted node %s", p.Name, node)
				}
			}
		})
	}
}

// setTaint adds (or removes) a NoSchedule taint on a node.
func setTaint(t *testing.T, ctx context.Context, h *harness.Harness, node, key string, on bool) {
	t.Helper()
	n, err := h.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var taints []corev1.Taint
	for _, tn := range n.Spec.Taints {
		if tn.Key != key {
			taints = append(taints, tn)
		}
	}
	if on {
		taints = append(taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
	n.Spec.Taints = taints
	if _, err := h.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
