package operators

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// gpuSpec is a Lockstep pod's spec with one container (named as the
// operator expects its main container) and, for gpus > 0, a claim for that
// many GPUs of the template twoGPUs.
func gpuSpec(container string, gpus int) corev1.PodSpec {
	b := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1")
	if gpus > 0 {
		b = b.ClaimTemplate("gpu", fmt.Sprintf("gpus-%d", gpus))
	}
	spec := b.Obj().Spec
	spec.Containers[0].Name = container
	return spec
}

// extendedGPU is the extended resource a DRA DeviceClass serves
// (extendedResourceName): how a pod asks for devices without a claim, as a
// kind whose CRD prunes claims (the training operator's v1.8.1) must.
const extendedGPU = corev1.ResourceName("example.com/gpu")

// extendedGPUSpec is gpuSpec asking for its GPUs as extendedGPU.
func extendedGPUSpec(container string, gpus int) corev1.PodSpec {
	spec := gpuSpec(container, 0)
	q := resource.MustParse(fmt.Sprint(gpus))
	spec.Containers[0].Resources.Requests[extendedGPU] = q
	spec.Containers[0].Resources.Limits = corev1.ResourceList{extendedGPU: q}
	return spec
}

// gpuTemplates creates the claim templates gpuSpec names.
func gpuTemplates(t *testing.T, ctx context.Context, h *harness.Harness, ns string) {
	t.Helper()
	for _, n := range []int64{1, 2} {
		if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, fmt.Sprintf("gpus-%d", n), "gpu.example.com", n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// create creates a typed object of another project's kind through the
// dynamic client.
func create(t *testing.T, ctx context.Context, h *harness.Harness, gvr schema.GroupVersionResource, o runtime.Object) {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := h.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// workload is one kind as its operator runs it.
type workload struct {
	// kind is the owner kind of its PodGroup; alias what explain takes.
	kind, alias string
	gvr         schema.GroupVersionResource
	// make returns an instance named name whose pods together need 6 of
	// the cluster's 8 GPUs.
	make func(ns, name string) runtime.Object
	// selector selects an instance's pods by its operator's labels.
	selector func(name string) string
	// size is how many pods an instance has, minCount its gang's.
	size     int
	minCount int32
}

// pods counts an instance's pods, those bound, and whether every one is in
// the instance's group.
func (w workload) pods(ctx context.Context, h *harness.Harness, ns, name string) (total, bound int, grouped bool, err error) {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: w.selector(name)})
	if err != nil {
		return 0, 0, false, err
	}
	grouped = len(pods.Items) > 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
		if p.Labels[lockv1.PodGroupLabel] != name {
			grouped = false
		}
	}
	return len(pods.Items), bound, grouped, nil
}

// twoInstances: two instances that together need more GPUs than exist
// (6 + 6 of 8), created as their users write them: one runs whole, the
// other holds nothing and its group explains why (also through `lockstep
// explain <kind> NAME`); deleting the first lets the second run whole.
func twoInstances(t *testing.T, w workload) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	gpuTemplates(t, ctx, h, ns)
	const class = "gpu.example.com"
	for _, name := range []string{"a", "b"} {
		create(t, ctx, h, w.gvr, w.make(ns, name))
	}
	var winner, loser string
	harness.Eventually(t, ctx, fmt.Sprintf("one %s %d/%d bound, every pod in its group", w.kind, w.size, w.size), func(ctx context.Context) (bool, string, error) {
		ta, a, ga, err := w.pods(ctx, h, ns, "a")
		if err != nil {
			return false, "", err
		}
		tb, b, gb, err := w.pods(ctx, h, ns, "b")
		if err != nil {
			return false, "", err
		}
		switch {
		case a == w.size:
			winner, loser = "a", "b"
		case b == w.size:
			winner, loser = "b", "a"
		}
		return winner != "" && ga && gb, fmt.Sprintf("a: %d pods, %d bound (grouped %v); b: %d pods, %d bound (grouped %v)", ta, a, ga, tb, b, gb), nil
	})
	harness.Eventually(t, ctx, loser+" waiting whole with a condition saying why", func(ctx context.Context) (bool, string, error) {
		total, bound, _, err := w.pods(ctx, h, ns, loser)
		if err != nil {
			return false, "", err
		}
		c, err := h.ScheduledCondition(ctx, ns, loser)
		if err != nil || c == nil {
			return false, "no condition", err
		}
		return total == w.size && bound == 0 && c.Reason == lockv1.PodGroupReasonUnschedulable && strings.Contains(c.Message, "no free device of class "+class),
			fmt.Sprintf("%d pods, %d bound; %s: %s", total, bound, c.Reason, c.Message), nil
	})
	pg, err := h.PodGroup(ctx, ns, winner)
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].Kind != w.kind || pg.OwnerReferences[0].Name != winner {
		t.Errorf("PodGroup owner: want %s %s, got %+v", w.kind, winner, pg.OwnerReferences)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != w.minCount {
		t.Errorf("PodGroup spec: want a gang of minCount %d, got %+v", w.minCount, pg.Spec)
	}
	r := h.Explain(t, ns, w.alias, loser)
	if r.Unit != "PodGroup "+ns+"/"+loser || !r.Gang || r.MinCount != int(w.minCount) || r.Bound != 0 || !strings.Contains(r.Answer, "no free device of class "+class) {
		t.Errorf("explain %s %s: unit %q gang %v minCount %d bound %d answer %q", w.alias, loser, r.Unit, r.Gang, r.MinCount, r.Bound, r.Answer)
	}
	if err := h.Dynamic.Resource(w.gvr).Namespace(ns).Delete(ctx, winner, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, fmt.Sprintf("%s gets all its GPUs once %s is gone", loser, winner), func(ctx context.Context) (bool, string, error) {
		total, bound, _, err := w.pods(ctx, h, ns, loser)
		return total == w.size && bound == w.size, fmt.Sprintf("%d pods, %d bound", total, bound), err
	})
	h.NoLifecycleRestart(t, ctx, ns, loser)
}
