package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestImmutableFieldsCannotBeAddedOrRemoved: through the real API server,
// every immutable PodGroup field is refused when added or removed (not only
// when changed), with its field path.
func TestImmutableFieldsCannotBeAddedOrRemoved(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	class := "imm-" + ns
	priorityClass(t, ctx, h, class, 500)
	fields := map[string]struct {
		set  func(*lockv1.PodGroup)
		path string
	}{
		"priorityClassName": {func(pg *lockv1.PodGroup) { pg.Spec.PriorityClassName = class }, "spec.priorityClassName"},
		"disruptionMode": {func(pg *lockv1.PodGroup) {
			pg.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
		}, "spec.disruptionMode"},
		"schedulingConstraints": {func(pg *lockv1.PodGroup) {
			pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}}}
		}, "spec.schedulingConstraints"},
		"preemptionPolicy": {func(pg *lockv1.PodGroup) {
			pg.Spec.PreemptionPolicy = ptr.To(lockv1.PreemptLowerPriority)
		}, "spec.preemptionPolicy"},
		"workloadRef": {func(pg *lockv1.PodGroup) {
			pg.Spec.WorkloadRef = &lockv1.WorkloadReference{WorkloadName: "w", TemplateName: "t"}
		}, "spec.workloadRef"},
	}
	for name, f := range fields {
		for _, op := range []string{"add", "remove"} {
			t.Run(op+" "+name, func(t *testing.T) {
				pg := builders.GangPodGroup(ns, strings.ToLower(op+"-"+name), 2)
				if op == "remove" {
					f.set(pg)
				}
				h.CreatePodGroup(ctx, t, pg)
				err := updatePodGroup(ctx, h, ns, pg.Name, func(cur *lockv1.PodGroup) {
					if op == "add" {
						f.set(cur)
						return
					}
					cur.Spec = builders.GangPodGroup(ns, pg.Name, 2).Spec
				})
				if err == nil || !strings.Contains(err.Error(), f.path) || !strings.Contains(err.Error(), "immutable") {
					t.Errorf("%s %s: want a refusal naming %s as immutable, got %v", op, name, f.path, err)
				}
			})
		}
	}
	t.Run("add priority", func(t *testing.T) {
		pg := builders.GangPodGroup(ns, "add-priority", 2)
		pg.Spec.PriorityClassName = class
		h.CreatePodGroup(ctx, t, pg)
		err := updatePodGroup(ctx, h, ns, pg.Name, func(cur *lockv1.PodGroup) { cur.Spec.Priority = ptr.To[int32](500) })
		if err == nil || !strings.Contains(err.Error(), "spec.priority") {
			t.Errorf("adding spec.priority: want a refusal naming spec.priority, got %v", err)
		}
	})
}

// updatePodGroup applies mutate to the current PodGroup and updates it,
// again on a write conflict (the scheduler writes status meanwhile), and
// returns the API server's answer.
func updatePodGroup(ctx context.Context, h *harness.Harness, ns, name string, mutate func(*lockv1.PodGroup)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := h.PodGroup(ctx, ns, name)
		if err != nil {
			return err
		}
		mutate(cur)
		u, err := podgroup.ToUnstructured(cur)
		if err != nil {
			return err
		}
		_, err = h.Dynamic.Resource(podgroup.Resource).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
}

// TestMembershipIsFixedAtCreation: the membership label cannot be removed,
// added or changed on an existing pod (a pending rank would be bound alone,
// any pod moved into another gang); a pod joins only its Job's gang.
func TestMembershipIsFixedAtCreation(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "gang", 3))
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "other", 3))
	rank := builders.MakePod().Namespace(ns).Name("rank").Member("gang").Req(corev1.ResourceCPU, "1").Obj()
	loner := builders.MakePod().Namespace(ns).Name("loner").Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "100").Obj()
	for _, p := range []*corev1.Pod{rank, loner} {
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, pod, patch string
	}{
		{"remove the label from a pending rank", "rank", `{"metadata":{"labels":{"scheduling.lockstep.dev/pod-group":null}}}`},
		{"move a rank to another gang", "rank", `{"metadata":{"labels":{"scheduling.lockstep.dev/pod-group":"other"}}}`},
		{"add a lone pod to a gang", "loner", `{"metadata":{"labels":{"scheduling.lockstep.dev/pod-group":"gang"}}}`},
	} {
		_, err := h.Client.CoreV1().Pods(ns).Patch(ctx, tc.pod, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{})
		if err == nil || !strings.Contains(err.Error(), "fixed when it is created") {
			t.Errorf("%s: want a refusal, got %v", tc.name, err)
		}
	}
	if p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "rank", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" || podgroup.GroupOf(p) != "gang" {
		t.Errorf("the rank must still wait, unbound, in its gang: %v", err)
	}

	// A Job's gang takes only that Job's pods.
	job := builders.IndexedJob(ns, "train", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "100").Obj())
	created, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.BatchV1().Jobs(ns).Delete(context.Background(), "train", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	harness.Eventually(t, ctx, "the Job's PodGroup", func(ctx context.Context) (bool, string, error) {
		_, err := h.PodGroup(ctx, ns, "train")
		return err == nil, fmt.Sprint(err), nil
	})
	intruder := builders.MakePod().Namespace(ns).Name("intruder").Member("train").Obj()
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, intruder, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "is the gang of Job train") {
		t.Errorf("a bare pod joining a Job's gang: want a refusal, got %v", err)
	}
	forged := builders.MakePod().Namespace(ns).Name("forged").Member("gang").Obj()
	forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: created.UID, Controller: ptr.To(true)}}
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, forged, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "joins only that Job's PodGroup (train)") {
		t.Errorf("a pod of Job train naming another gang: want a refusal, got %v", err)
	}
}
