//go:build soak

package soak

import (
	"context"
	"math/rand/v2"
	"os"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// maxActive bounds the gangs alive at once: a new gang every 0.6 s, each of
// ~7 ranks living ~20 s, asks for more than the cluster's 128 GPUs, so gangs
// queue and urgent ones (12–24 ranks) must preempt.
const maxActive = 60

func TestSoak(t *testing.T) {
	d := 10 * time.Minute
	if v := os.Getenv("LOCKSTEP_SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, d+5*time.Minute)
	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: classLow}, Value: 100},
		{ObjectMeta: metav1.ObjectMeta{Name: classHigh}, Value: 10000},
	} {
		if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg := &registry{}
	obs, err := newObserver(ctx, h, ns, reg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	t.Logf("soak: %s on 16 nodes × 8 GPUs", d)
	start := time.Now()
	deadline := start.Add(d)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	next, nextLoss := 0, start.Add(45*time.Second)
	var restore []func()
	for now := range tick.C {
		if now.After(deadline) {
			break
		}
		obs.check(now)
		jobs, err := h.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		for i := range jobs.Items {
			j := &jobs.Items[i]
			if !finished(j) {
				active++
				continue
			}
			if j.Status.CompletionTime != nil && now.Sub(j.Status.CompletionTime.Time) > 20*time.Second || j.DeletionTimestamp == nil && now.Sub(j.CreationTimestamp.Time) > 5*time.Minute {
				_ = h.Client.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
			}
		}
		for ; active < maxActive && int(now.Sub(start)/(600*time.Millisecond)) >= next; next++ {
			g := newGang(rng, next)
			g.created = now
			reg.add(g)
			if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, g.job(rng, ns), metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s: %v", g.name, err)
			}
			active++
		}
		if now.After(nextLoss) {
			nextLoss = now.Add(time.Duration(50+rng.IntN(30)) * time.Second)
			if node := nodeUnderGang(ctx, h, ns, rng); node != "" {
				obs.lost(node)
				restore = append(restore, deleteNode(t, ctx, h, node))
			}
		}
	}
	for _, r := range restore {
		r()
	}
	// Let the last verdicts land before judging them.
	for i := 0; i < 10; i++ {
		obs.check(time.Now())
		time.Sleep(time.Second)
	}
	obs.judgeEnds()
	report := obs.report(time.Since(start))
	t.Log("\n" + report)
	if next < 200 {
		t.Errorf("the soak ran only %d gangs; it needs at least 200", next)
	}
	if len(obs.violations) > 0 {
		t.Errorf("%d violations (see the report above)", len(obs.violations))
	}
}

// nodeUnderGang picks a node that runs ranks of a gang meant to meet a node
// loss, else any node running ranks.
func nodeUnderGang(ctx context.Context, h *harness.Harness, ns string, rng *rand.Rand) string {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var preferred, any []string
	for _, p := range pods.Items {
		if !podgroup.Active(&p) || p.Status.Phase != corev1.PodRunning {
			continue
		}
		any = append(any, p.Spec.NodeName)
		if len(p.Name) > 0 && p.Annotations["sim.lockstep.dev/succeed-after-by-index"] != "" && p.Spec.PriorityClassName == classLow {
			preferred = append(preferred, p.Spec.NodeName)
		}
	}
	pick := preferred
	if len(pick) == 0 {
		pick = any
	}
	if len(pick) == 0 {
		return ""
	}
	sort.Strings(pick)
	return pick[rng.IntN(len(pick))]
}

// deleteNode deletes a node as a cloud provider does when its instance is
// gone; the returned func (also run 30 s later) recreates it.
func deleteNode(t *testing.T, ctx context.Context, h *harness.Harness, name string) func() {
	node, err := h.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return func() {}
	}
	if err := h.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Logf("deleting node %s: %v", name, err)
		return func() {}
	}
	back := func() {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels, Annotations: node.Annotations},
			Spec:       node.Spec,
			Status:     corev1.NodeStatus{Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable},
		}
		if _, err := h.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Logf("recreating node %s: %v", name, err)
		}
	}
	time.AfterFunc(30*time.Second, back)
	return back
}
