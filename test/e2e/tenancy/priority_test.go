package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestPriorityCannotBeSelfGranted: a user confined to tenant-a, whose quota
// forbids pods of class system-cluster-critical, names that class on a
// PodGroup or CompositePodGroup: refused, naming the quota; names another
// class on a PodGroup and creates class-less pods for it: the pods are
// refused (a group's priority is its members'); pods of the forbidden class
// are refused by the quota; and the priority-10000 gang of tenant-b is
// never preempted.
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
	// A group naming the class the quota forbids is refused, naming the quota.
	pg := builders.GangPodGroup(nsA, "a", 4)
	pg.Spec.PriorityClassName = "system-cluster-critical"
	err := alice.h.CreatePodGroupErr(ctx, pg)
	const byQuota = "ResourceQuota no-system-priority of namespace "
	if err == nil || !strings.Contains(err.Error(), byQuota+nsA+" allows no pod of PriorityClass system-cluster-critical (pods: 0)") {
		t.Errorf("a PodGroup naming a class the namespace's quota forbids: want a refusal naming the quota, got %v", err)
	}
	root := cpg(nsA, "tree", "")
	root.Spec.PriorityClassName = "system-cluster-critical"
	if err := createComposite(ctx, h, root, false); err == nil || !strings.Contains(err.Error(), byQuota+nsA) {
		t.Errorf("a CompositePodGroup naming a class the namespace's quota forbids: want a refusal naming the quota, got %v", err)
	}
	// A group naming a class its pods do not have: the class-less pods are
	// refused (a group's priority is its members').
	pg.Spec.PriorityClassName = classB
	if err := alice.h.CreatePodGroupErr(ctx, pg); err != nil {
		t.Fatalf("alice creating her PodGroup: %v", err)
	}
	if _, err := alice.client.ResourceV1().ResourceClaimTemplates(nsA).Create(ctx, builders.ClaimTemplate(nsA, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = alice.client.CoreV1().Pods(nsA).Create(ctx, gpuPod(nsA, "a-0", "a", ""), metav1.CreateOptions{})
	for _, want := range []string{"priority 0 differs from PodGroup a's priorityClassName " + classB + " (10000)", "a group's priority is its members'"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a class-less pod of a group naming %s: want a refusal containing %q, got %v", classB, want, err)
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

// TestGroupCannotGrantPreemption: a tenant whose high PriorityClass says
// preemptionPolicy Never writes PreemptLowerPriority on its own PodGroup:
// its gang does not fit, the scheduler says it will not preempt (members'
// Never wins), and the lower-priority gang of another namespace keeps
// running untouched. The tenant cannot add or change the group's policy
// afterwards either.
func TestGroupCannotGrantPreemption(t *testing.T) {
	h := harness.Get(t)
	nsLow, nsHigh := h.Namespace(t), h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	low, never := "low-"+nsLow, "never-"+nsHigh
	priorityClass(t, ctx, h, low, 100)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: never}, Value: 10000, PreemptionPolicy: ptr.To(corev1.PreemptNever)}
	if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), never, metav1.DeleteOptions{})
	})
	gpuGang(t, ctx, h, h.Client, nsLow, "low", 4, "", low)
	before := h.WaitRunning(t, ctx, nsLow, "low", 4)

	mallory := newTenant(t, ctx, h, nsHigh, "mallory")
	if _, err := mallory.client.ResourceV1().ResourceClaimTemplates(nsHigh).Create(ctx, builders.ClaimTemplate(nsHigh, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pg := builders.GangPodGroup(nsHigh, "grab", 4)
	pg.Spec.PreemptionPolicy = ptr.To(lockv1.PreemptLowerPriority)
	if err := mallory.h.CreatePodGroupErr(ctx, pg); err != nil {
		t.Fatalf("mallory creating her PodGroup: %v", err)
	}
	for i := 0; i < 4; i++ {
		if _, err := mallory.client.CoreV1().Pods(nsHigh).Create(ctx, gpuPod(nsHigh, fmt.Sprintf("grab-%d", i), "grab", never), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating member %d: %v", i, err)
		}
	}
	// Wait for the scheduler's verdict either way: the event that it will
	// not preempt, or the other gang disturbed.
	var notes []string
	harness.Eventually(t, ctx, "the scheduler decides whether the gang preempts", func(ctx context.Context) (bool, string, error) {
		var err error
		notes, err = eventNotes(ctx, h, nsHigh, "PodGroup", "grab", "NotPreempting")
		now, _ := h.RunningPods(ctx, nsLow, "low")
		return len(notes) > 0 || !sameUIDs(before, now), fmt.Sprintf("NotPreempting %q, %d of 4 original pods of the other gang running", notes, overlap(before, now)), err
	})
	// The pods' Never (from their PriorityClass) wins over the group's
	// PreemptLowerPriority, and the event names the pod that says it.
	if !strings.Contains(strings.Join(notes, "\n"), "preemptionPolicy Never (pod "+nsHigh+"/") {
		t.Errorf("want a NotPreempting event naming a pod whose preemptionPolicy is Never, got %q", notes)
	}
	time.Sleep(3 * time.Second) // a later cycle would not decide otherwise; give it the chance
	if now, _ := h.RunningPods(ctx, nsLow, "low"); len(now) != 4 || !sameUIDs(before, now) {
		t.Errorf("the other namespace's gang was disturbed: %d of 4 original pods running", overlap(before, now))
	}
	pods, _, _ := h.GroupPods(ctx, nsLow, "low")
	for i := range pods {
		if c := podgroup.Disruption(&pods[i]); c != nil {
			t.Errorf("pod %s of the other namespace was marked for disruption: %s", pods[i].Name, c.Message)
		}
	}
	if n := bound(t, ctx, h, nsHigh, "grab"); n != 0 {
		t.Errorf("the Never gang bound %d pods on GPUs it could only get by preempting", n)
	}

	// Nor can the policy be changed, or added to a group created without one.
	err := updatePodGroup(ctx, mallory.h, nsHigh, "grab", func(cur *lockv1.PodGroup) { cur.Spec.PreemptionPolicy = ptr.To(lockv1.PreemptNever) })
	if err == nil || !strings.Contains(err.Error(), "spec.preemptionPolicy") || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing preemptionPolicy: want a refusal naming spec.preemptionPolicy as immutable, got %v", err)
	}
	if err := mallory.h.CreatePodGroupErr(ctx, builders.GangPodGroup(nsHigh, "later", 2)); err != nil {
		t.Fatal(err)
	}
	err = updatePodGroup(ctx, mallory.h, nsHigh, "later", func(cur *lockv1.PodGroup) { cur.Spec.PreemptionPolicy = ptr.To(lockv1.PreemptLowerPriority) })
	if err == nil || !strings.Contains(err.Error(), "spec.preemptionPolicy") || !strings.Contains(err.Error(), "cannot be added or removed") {
		t.Errorf("adding preemptionPolicy: want a refusal naming spec.preemptionPolicy, got %v", err)
	}
}

// eventNotes are the notes of the events with this reason about one object.
func eventNotes(ctx context.Context, h *harness.Harness, ns, kind, name, reason string) ([]string, error) {
	evs, err := h.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out, nil
}
