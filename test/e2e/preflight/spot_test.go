package preflight

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// Gangs stay off Spot unless they ask for it: on the EKS-shaped cluster
// the device plugin's nvidia.com/gpu is on auto-0 (on-demand) and spot-0
// (Karpenter Spot), one each. A 2-rank gang whose pods tolerate every
// taint, without the annotation, is not placed — the scheduler's default
// capacity types (on-demand, reserved) leave spot-0 out, and its pods say
// so; the same gang listing spot binds across both nodes.
func TestGangsStayOffSpotUnlessTheyAskForIt(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	gang := func(name, capacity string) {
		pg := builders.GangPodGroup(ns, name, 2)
		if capacity != "" {
			pg.Annotations = map[string]string{lockv1.CapacityTypesAnnotation: capacity}
		}
		h.CreatePodGroup(ctx, t, pg)
		for i := range 2 {
			p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", name, i)).Member(name).Req("nvidia.com/gpu", "1").Obj()
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	gang("on-demand", "")
	harness.Eventually(t, ctx, "the gang without spot is unschedulable, naming the Spot node's capacity type", func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "on-demand-0", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Spec.NodeName != "" {
			return false, "", fmt.Errorf("bound to %s: a gang without spot in its capacity types placed on the cluster's one on-demand GPU and its Spot GPU", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && strings.Contains(c.Message, "node(s) are spot capacity, which the group's capacity-types (on-demand,reserved) exclude") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("conditions %v", p.Status.Conditions), nil
	})
	if err := h.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=on-demand"}); err != nil {
		t.Fatal(err)
	}
	gang("spot-ok", "on-demand,spot")
	harness.Eventually(t, ctx, "the gang listing spot bound on auto-0 and spot-0", func(ctx context.Context) (bool, string, error) {
		nodes := map[string]bool{}
		for i := range 2 {
			p, err := h.Client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("spot-ok-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			nodes[p.Spec.NodeName] = true
		}
		return nodes["auto-0"] && nodes["spot-0"], fmt.Sprintf("nodes %v", nodes), nil
	})
}
