package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestGangsThatWaitedAreNotRestarted: a 32-rank gang Job and a 256-pod
// gang of bare pods wait (well past any settle time) while the cluster's
// CPUs are taken, bind whole when they are freed, and are then left alone:
// the same pods keep running, incarnation 1, no restart.
func TestGangsThatWaitedAreNotRestarted(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		job  bool
	}{
		{"32-rank Job", 32, true},
		{"256 bare pods", 256, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, 6*time.Minute)
			blockers := fillCPUs(t, ctx, h, ns)

			if tc.job {
				gangJob(t, ctx, h, ns, "gang", int32(tc.size), false, nil)
			} else {
				h.CreatePodGroup(ctx, t, gangGroup(ns, "gang", int32(tc.size)))
				barePods(t, ctx, h, ns, "gang", tc.size, "1", nil)
			}
			harness.Eventually(t, ctx, "the gang unschedulable while the CPUs are taken", func(ctx context.Context) (bool, string, error) {
				c, err := h.ScheduledCondition(ctx, ns, "gang")
				if err != nil || c == nil {
					return false, fmt.Sprintf("no condition (%v)", err), nil
				}
				return c.Status == metav1.ConditionFalse && c.Reason == lockv1.PodGroupReasonUnschedulable, c.Reason + ": " + c.Message, nil
			})
			time.Sleep(8 * time.Second) // longer than the integrity controller's settle time
			for _, b := range blockers {
				if err := h.Client.CoreV1().Pods(ns).Delete(ctx, b, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			bound := waitRunning(t, ctx, h, ns, "gang", tc.size)
			time.Sleep(15 * time.Second)
			if n := stillRunning(t, ctx, h, ns, "gang", bound); n != tc.size {
				t.Errorf("%d of the %d pods bound after waiting still run", n, tc.size)
			}
			h.NoLifecycleRestart(t, ctx, ns, "gang")
			st, err := h.State(ctx, ns, "gang")
			if err != nil {
				t.Fatal(err)
			}
			if st.RunningReason() != lockv1.RunningReasonRunning || st.Incarnation == nil || st.Incarnation.Number != 1 || len(st.Incarnation.Members) != tc.size {
				t.Errorf("want Running, incarnation 1 with %d members; got %s", tc.size, st)
			}
		})
	}
}

// fillCPUs takes every node's CPUs with one lone pod each and returns their names.
func fillCPUs(t *testing.T, ctx context.Context, h *harness.Harness, ns string) []string {
	t.Helper()
	nodes, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		name := "blocker-" + n.Name
		cpu := n.Status.Allocatable[corev1.ResourceCPU]
		p := builders.MakePod().Namespace(ns).Name(name).Scheduler(lockv1.SchedulerName).Node(n.Name).Req(corev1.ResourceCPU, cpu.String()).Obj()
		p.Spec.NodeName = ""
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": n.Name}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	harness.Eventually(t, ctx, "blockers running", func(ctx context.Context) (bool, string, error) {
		running := 0
		for _, name := range names {
			p, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == len(names), fmt.Sprintf("%d of %d", running, len(names)), nil
	})
	return names
}
