package partitions

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// template is a claim template of one device of class, narrowed by CEL
// selectors.
func template(t *testing.T, ctx context.Context, h *harness.Harness, ns, name, class string, selectors ...string) {
	t.Helper()
	tmpl := builders.ClaimTemplate(ns, name, class, 1)
	for _, s := range selectors {
		tmpl.Spec.Spec.Devices.Requests[0].Exactly.Selectors = append(tmpl.Spec.Spec.Devices.Requests[0].Exactly.Selectors,
			resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: s}})
	}
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// allocatedDevices maps each pod's claim to the device it got, by pod.
func allocatedDevices(ctx context.Context, h *harness.Harness, ns string) (map[string]string, error) {
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range claims.Items {
		if a := c.Status.Allocation; a != nil && len(c.Status.ReservedFor) > 0 {
			out[c.Status.ReservedFor[0].Name] = a.Devices.Results[0].Pool + "/" + a.Devices.Results[0].Device
		}
	}
	return out, nil
}

// gpuOf is the GPU a device is, or is carved from: "a100-0/gpu-1-1g-3" → "a100-0/gpu-1".
func gpuOf(device string) string {
	pool, dev, _ := strings.Cut(device, "/")
	parts := strings.SplitN(dev, "-", 3)
	return pool + "/" + parts[0] + "-" + parts[1]
}

// TestGangOfPartitions: 8 ranks of one 1g partition each bind together, on
// 8 distinct partitions of at most 2 GPUs — packed, since the scheduler
// counts a partitioned GPU as one device in use, not as its free partitions.
func TestGangOfPartitions(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	template(t, ctx, h, ns, "one-1g", "mig-1g")
	job := builders.IndexedJob(ns, "infer", 8, builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("mig", "one-1g").Obj())
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var devices map[string]string
	harness.Eventually(t, ctx, "8 ranks bound on 1g partitions", func(ctx context.Context) (bool, string, error) {
		_, bound, err := h.GroupPods(ctx, ns, "infer")
		if err != nil {
			return false, "", err
		}
		devices, err = allocatedDevices(ctx, h, ns)
		return bound == 8 && len(devices) == 8, fmt.Sprintf("%d bound, %d claims reserved", bound, len(devices)), err
	})
	distinct, gpus := sets.New[string](), sets.New[string]()
	for _, d := range devices {
		if !strings.Contains(d, "-1g-") {
			t.Errorf("a rank got %s, not a 1g partition", d)
		}
		distinct.Insert(d)
		gpus.Insert(gpuOf(d))
	}
	if distinct.Len() != 8 {
		t.Errorf("want 8 distinct partitions, got %v", devices)
	}
	if gpus.Len() > 2 {
		t.Errorf("8 1g partitions fit on 2 GPUs (7 each); the gang spread over %d: %v", gpus.Len(), sets.List(gpus))
	}
}

// TestWholeGPUsWaitForPartitions: with a 1g partition in use on each of
// the 4 GPUs, a gang of 2 ranks that each want a whole GPU waits, and its
// condition and explain count GPUs, not partitions; freeing the partitions
// of one node's 2 GPUs lets it bind there.
func TestWholeGPUsWaitForPartitions(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	for gpu := 0; gpu < 2; gpu++ {
		template(t, ctx, h, ns, fmt.Sprintf("1g-of-gpu-%d", gpu), "mig-1g", fmt.Sprintf(`device.attributes["gpu.example.com"].index == %d`, gpu))
	}
	template(t, ctx, h, ns, "whole", "whole-gpu")
	for _, node := range []string{"a100-0", "a100-1"} {
		for gpu := 0; gpu < 2; gpu++ {
			p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("slice-%s-%d", node, gpu)).Scheduler(lockv1.SchedulerName).
				ClaimTemplate("mig", fmt.Sprintf("1g-of-gpu-%d", gpu)).Obj()
			p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	harness.Eventually(t, ctx, "a 1g partition in use on every GPU", func(ctx context.Context) (bool, string, error) {
		devices, err := allocatedDevices(ctx, h, ns)
		return len(devices) == 4, fmt.Sprintf("%d partitions allocated: %v", len(devices), devices), err
	})
	job := builders.IndexedJob(ns, "train", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).ClaimTemplate("gpu", "whole").Obj())
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const want = "no free device of class whole-gpu (4 devices, 0 in use, 4 partly in use (partitions))"
	harness.Eventually(t, ctx, "the gang unschedulable, counting GPUs", func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, "train")
		if apierrors.IsNotFound(err) || err == nil && c == nil {
			return false, "no condition yet", nil
		}
		if err != nil {
			return false, "", err
		}
		return strings.Contains(c.Message, want), c.Message, nil
	})
	if _, bound, err := h.GroupPods(ctx, ns, "train"); err != nil || bound != 0 {
		t.Fatalf("want no rank bound while every GPU has a partition in use, got %d (err %v)", bound, err)
	}
	r := h.Explain(t, ns, "podgroup", "train")
	var got string
	for _, d := range r.Devices {
		if d.Class == "whole-gpu" {
			got = fmt.Sprintf("%d devices, %d allocated, %d partly", d.Total, d.Allocated, d.Partial)
		}
	}
	if got != "4 devices, 0 allocated, 4 partly" {
		t.Errorf("explain, class whole-gpu: want 4 devices, 0 allocated, 4 partly; got %q (%+v)", got, r.Devices)
	}
	for _, name := range []string{"slice-a100-1-0", "slice-a100-1-1"} {
		if err := h.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "the gang bound to the 2 GPUs freed", func(ctx context.Context) (bool, string, error) {
		devices, err := allocatedDevices(ctx, h, ns)
		if err != nil {
			return false, "", err
		}
		var got []string
		for pod, d := range devices {
			if strings.HasPrefix(pod, "train-") {
				got = append(got, d)
			}
		}
		sort.Strings(got)
		return fmt.Sprint(got) == "[a100-1/gpu-0 a100-1/gpu-1]", fmt.Sprintf("ranks got %v", got), nil
	})
}
