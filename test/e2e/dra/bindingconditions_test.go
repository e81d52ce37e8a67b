package dra

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// Devices that need their driver to attach them first (binding conditions):
// the pod is bound only once the claim's device status reports the
// condition True; a failure condition gives the allocation back and the pod
// is not bound.
func TestDeviceBindingConditions(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	// node-1's GPUs on pci-1 (gpu-2, gpu-3) need attaching.
	changeDevices(t, ctx, h, "node-1-gpu.example.com", func(d *resourcev1.Device) {
		if d.Name == "gpu-2" || d.Name == "gpu-3" {
			d.BindingConditions = []string{"example.com/attached"}
			d.BindingFailureConditions = []string{"example.com/failed"}
		}
	})
	run := func(name, report string) {
		t.Helper()
		claim := builders.Claim(ns, name, "gpu.example.com", 1)
		claim.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.attributes["resource.kubernetes.io"].pcieRoot == "pci-1"`}}}
		if _, err := h.Client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := builders.MakePod().Namespace(ns).Name(name).Scheduler("lockstep").Claim("gpu", name).Obj()
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "node-1"}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var device resourcev1.DeviceRequestAllocationResult
		harness.Eventually(t, ctx, name+"'s claim allocated a device that needs attaching", func(ctx context.Context) (bool, string, error) {
			c, err := h.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || c.Status.Allocation == nil {
				return false, "not allocated", err
			}
			device = c.Status.Allocation.Devices.Results[0]
			if len(device.BindingConditions) != 1 || c.Status.Allocation.AllocationTimestamp == nil {
				return false, "", fmt.Errorf("allocation %+v lacks the binding conditions or its timestamp", c.Status.Allocation)
			}
			return true, "", nil
		})
		time.Sleep(2 * time.Second)
		if cur, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || cur.Spec.NodeName != "" {
			t.Fatalf("%s bound (%q, %v) before its device reported attached", name, cur.Spec.NodeName, err)
		}
		// The driver reports.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := h.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: device.Driver, Pool: device.Pool, Device: device.Device,
				Conditions: []metav1.Condition{{Type: report, Status: metav1.ConditionTrue, Reason: "Reported", Message: "by the test", LastTransitionTime: metav1.Now()}}}}
			_, err = h.Client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	run("attached", "example.com/attached")
	harness.Eventually(t, ctx, "the pod bound once its device is attached", func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "attached", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "node-1", "not bound", err
	})

	run("failed", "example.com/failed")
	harness.Eventually(t, ctx, "the failed attachment reported, the pod not bound", func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "failed", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Spec.NodeName != "" {
			return false, "", fmt.Errorf("pod bound on %s although its device failed to attach", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == "SchedulerError" && strings.Contains(c.Message, "reports example.com/failed") {
				return true, "", nil
			}
		}
		return false, "no PodScheduled condition naming the failure condition", nil
	})
}
