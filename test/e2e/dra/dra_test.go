package dra

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const pcieRoot = resourcev1.FullyQualifiedName("resource.kubernetes.io/pcieRoot")

func TestSharedClaimPinsItsPods(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	if _, err := h.Client.ResourceV1().ResourceClaims(ns).Create(ctx, builders.Claim(ns, "shared-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "sharers", 3))
	for i := 0; i < 3; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("sharer-%d", i)).Member("sharers").Req(corev1.ResourceCPU, "1").Claim("gpu", "shared-gpu").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "3 sharers bound where the shared GPU is", func(ctx context.Context) (bool, string, error) {
		pods, bound, err := h.GroupPods(ctx, ns, "sharers")
		if err != nil || bound < 3 {
			return false, fmt.Sprintf("%d bound", bound), err
		}
		c, err := h.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "shared-gpu", metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil {
			return false, "claim not allocated", err
		}
		pool := c.Status.Allocation.Devices.Results[0].Pool
		for _, p := range pods {
			if p.Spec.NodeName != pool {
				return false, "", fmt.Errorf("pod %s on %s, but its shared claim's device is on %s", p.Name, p.Spec.NodeName, pool)
			}
		}
		if len(c.Status.ReservedFor) != 3 {
			return false, fmt.Sprintf("reservedFor %d, want 3", len(c.Status.ReservedFor)), nil
		}
		return true, "", nil
	})
}

// A GPU and a NIC on the same PCIe root; and 3 GPUs on one root, which no
// node has (2 per root), must not be placed.
func TestMatchAttributeAcrossRequests(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	aligned := &resourcev1.ResourceClaim{
		ObjectMeta: builders.Meta(ns, "gpu-nic"),
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{
				{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}},
				{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "nic.example.com"}},
			},
			Constraints: []resourcev1.DeviceConstraint{{Requests: []string{"gpu", "nic"}, MatchAttribute: ptr.To(pcieRoot)}},
		}},
	}
	impossible := &resourcev1.ResourceClaim{
		ObjectMeta: builders.Meta(ns, "three-on-one-root"),
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{
				{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 3}},
			},
			Constraints: []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(pcieRoot)}},
		}},
	}
	for _, c := range []*resourcev1.ResourceClaim{aligned, impossible} {
		if _, err := h.Client.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := builders.MakePod().Namespace(ns).Name(c.Name).Scheduler("lockstep").Claim("devs", c.Name).Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "gpu-nic bound with devices on one PCIe root", func(ctx context.Context) (bool, string, error) {
		c, err := h.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "gpu-nic", metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil {
			return false, "not allocated", err
		}
		roots := map[string]bool{}
		for _, r := range c.Status.Allocation.Devices.Results {
			roots[rootOf(ctx, h, r)] = true
		}
		if len(roots) != 1 {
			return false, "", fmt.Errorf("devices on different PCIe roots: %v (%+v)", roots, c.Status.Allocation.Devices.Results)
		}
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "gpu-nic", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", "pod unbound", err
	})
	harness.Eventually(t, ctx, "three-on-one-root explained as unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "three-on-one-root", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Spec.NodeName != "" {
			return false, "", fmt.Errorf("impossible constraint placed on %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return true, "", nil
			}
		}
		return false, "no Unschedulable condition yet", nil
	})
}

// rootOf looks up a device's pcieRoot in its ResourceSlice.
func rootOf(ctx context.Context, h *harness.Harness, r resourcev1.DeviceRequestAllocationResult) string {
	slices, err := h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "?"
	}
	for _, s := range slices.Items {
		if s.Spec.Driver != r.Driver || s.Spec.Pool.Name != r.Pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.Name == r.Device {
				return *d.Attributes["resource.kubernetes.io/pcieRoot"].StringValue
			}
		}
	}
	return "?"
}

// A NoSchedule taint on one device stops new allocations of that device
// only: the node stays schedulable, its other GPUs are still handed out.
func TestNoScheduleDeviceTaintRemovesOnlyThatDevice(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	changeDevices(t, ctx, h, "node-0-gpu.example.com", func(d *resourcev1.Device) {
		if d.Name == "gpu-0" {
			d.Taints = []resourcev1.DeviceTaint{{Key: "example.com/unhealthy", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
	})
	// 4 pods pinned to node-0, one GPU each: 3 fit (gpu-1..3), gpu-0 is never used.
	tmpl := builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("p-%d", i)).Scheduler("lockstep").ClaimTemplate("gpu", "one-gpu").Obj()
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "node-0"}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "3 of 4 pods bound on node-0, none on the tainted gpu-0", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range claims.Items {
			if a := c.Status.Allocation; a != nil && a.Devices.Results[0].Device == "gpu-0" {
				return false, "", fmt.Errorf("claim %s got the NoSchedule-tainted gpu-0", c.Name)
			}
		}
		return bound == 3, fmt.Sprintf("%d bound", bound), nil
	})
	n, err := h.Client.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || len(n.Spec.Taints) > 0 {
		t.Errorf("one tainted device must not cordon or taint node-0: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
}

// changeDevices applies change to every device of a ResourceSlice and puts
// the slice back when the test ends.
func changeDevices(t *testing.T, ctx context.Context, h *harness.Harness, name string, change func(*resourcev1.Device)) {
	t.Helper()
	slice, err := h.Client.ResourceV1().ResourceSlices().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := slice.DeepCopy()
	for i := range slice.Spec.Devices {
		change(&slice.Spec.Devices[i])
	}
	if _, err := h.Client.ResourceV1().ResourceSlices().Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cur, err := h.Client.ResourceV1().ResourceSlices().Get(context.Background(), orig.Name, metav1.GetOptions{})
		if err == nil {
			cur.Spec = orig.Spec
			_, _ = h.Client.ResourceV1().ResourceSlices().Update(context.Background(), cur, metav1.UpdateOptions{})
		}
	})
}
