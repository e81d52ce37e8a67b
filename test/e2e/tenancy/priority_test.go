package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestPriorityCannotBeSelfGranted: a user confined to tenant-a, whose quota
// forbids pods of class system-cluster-critical, names that class on a
// PodGroup and creates class-less pods for it: the pods are refused (a
// group's priority is its members'), pods of the class are refused by the
// quota, and the priority-10000 gang of tenant-b is never preempted.
func TestPriorityCannotBeSelfGranted(t *testing.T) {
	h := harness.Get(t)
	nsA, nsB := h.Namespace(t), h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	classB := "tenant-b-" + nsB
	priorityClass(t, ctx, h, classB, 10000)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "no-system-priority"},
		Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{corev1.ResourcePods: builders.Quantity("0")},
			ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"system-cluster-critical"},
			}}},
		},
	}
	if _, err := h.Client.CoreV1().ResourceQuotas(nsA).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gpuGang(t, ctx, h, h.Client, nsB, "b", 4, "", classB)
	// Bound is not yet Running: the pods' phase comes from the kubelet a moment later.
	before := h.WaitRunning(t, ctx, nsB, "b", 4)

	alice := newTenant(t, ctx, h, nsA, "alice")
	pg := builders.GangPodGroup(nsA, "a", 4)
	pg.Spec.PriorityClassName = "system-cluster-critical"
	if err := alice.h.CreatePodGroupErr(ctx, pg); err != nil {
		t.Fatalf("alice creating her PodGroup: %v", err)
	}
	if _, err := alice.client.ResourceV1().ResourceClaimTemplates(nsA).Create(ctx, builders.ClaimTemplate(nsA, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := alice.client.CoreV1().Pods(nsA).Create(ctx, gpuPod(nsA, "a-0", "a", ""), metav1.CreateOptions{})
	for _, want := range []string{"priority 0 differs from PodGroup a's priorityClassName system-cluster-critical (2000000000)", "a group's priority is its members'"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a class-less pod of a group naming system-cluster-critical: want a refusal containing %q, got %v", want, err)
		}
	}
	_, err = alice.client.CoreV1().Pods(nsA).Create(ctx, gpuPod(nsA, "a-1", "a", "system-cluster-critical"), metav1.CreateOptions{})
	if err == nil {
		t.Errorf("a pod of class system-cluster-critical in a namespace whose quota forbids it was admitted")
	}
	time.Sleep(5 * time.Second)
	if now, _ := h.RunningPods(ctx, nsB, "b"); len(now) != 4 || !sameUIDs(before, now) {
		t.Errorf("tenant-b's gang was disturbed: %d of 4 original pods running", overlap(before, now))
	}
	pods, _, _ := h.GroupPods(ctx, nsB, "b")
	for i := range pods {
		if c := podgroup.Disruption(&pods[i]); c != nil {
			t.Errorf("tenant-b's pod %s was marked for disruption: %s", pods[i].Name, c.Message)
		}
	}
}

// TestGroupPriorityIsItsMembers: a PodGroup without a priorityClassName
// whose pods are priority 10000 is a priority-10000 gang — it preempts a
// priority-100 gang of another namespace (docs/preemption.md).
func TestGroupPriorityIsItsMembers(t *testing.T) {
	h := harness.Get(t)
	nsLow, nsHigh := h.Namespace(t), h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	low, high := "low-"+nsLow, "high-"+nsHigh
	priorityClass(t, ctx, h, low, 100)
	priorityClass(t, ctx, h, high, 10000)
	gpuGang(t, ctx, h, h.Client, nsLow, "low", 4, "", low)
	harness.Eventually(t, ctx, "the low gang running", func(ctx context.Context) (bool, string, error) {
		n := bound(t, ctx, h, nsLow, "low")
		return n == 4, fmt.Sprintf("%d bound", n), nil
	})
	gpuGang(t, ctx, h, h.Client, nsHigh, "high", 4, "", high)
	harness.Eventually(t, ctx, "the class-less group of priority-10000 pods preempts the low gang and runs", func(ctx context.Context) (bool, string, error) {
		n := bound(t, ctx, h, nsHigh, "high")
		return n == 4, fmt.Sprintf("%d bound", n), nil
	})
}

func sameUIDs[K comparable, V any](a, b map[K]V) bool {
	return overlap(a, b) == len(a) && len(a) == len(b)
}

func overlap[K comparable, V any](a, b map[K]V) int {
	n := 0
	for k := range a {
		if _, ok := b[k]; ok {
			n++
		}
	}
	return n
}
