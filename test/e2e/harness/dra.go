package harness

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/test/builders"
)

// CreateDeviceClass creates a cluster-scoped DeviceClass for the test (one
// that exists already is kept) and deletes it when the test ends.
func (h *Harness) CreateDeviceClass(ctx context.Context, t testing.TB, class *resourcev1.DeviceClass) {
	t.Helper()
	if _, err := h.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.ResourceV1().DeviceClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
}

// OneGPUTemplate creates ResourceClaimTemplate one-gpu in ns: one device
// of class gpu.example.com (the class every cluster spec's GPUs have).
func (h *Harness) OneGPUTemplate(ctx context.Context, t testing.TB, ns string) {
	t.Helper()
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ReportDeviceHealth writes, as the kubelet does with ResourceHealthStatus, the
// health of the GPU a running rank's claim holds into its container status
// (allocatedResourcesStatus), and returns the device ("driver/pool/device").
func (h *Harness) ReportDeviceHealth(t testing.TB, ctx context.Context, ns string, uid types.UID, health corev1.ResourceHealthStatus) (pod, device string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var p *corev1.Pod
		for i := range pods.Items {
			if pods.Items[i].UID == uid {
				p = &pods.Items[i]
			}
		}
		claimName, resource := heldClaim(p)
		if claimName == "" {
			return fmt.Errorf("rank %s has no claim status", uid)
		}
		claim, err := h.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		r := claim.Status.Allocation.Devices.Results[0]
		pod, device = p.Name, r.Driver+"/"+r.Pool+"/"+r.Device
		rs := corev1.ResourceStatus{
			Name:      resource,
			Resources: []corev1.ResourceHealth{{ResourceID: corev1.ResourceID(device), Health: health}},
		}
		if health == corev1.ResourceHealthStatusUnhealthy {
			rs.Resources[0].Message = ptr.To("XID 79: GPU has fallen off the bus")
		}
		p.Status.ContainerStatuses[0].AllocatedResourcesStatus = []corev1.ResourceStatus{rs}
		_, err = h.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pod, device
}

// heldClaim is the ResourceClaim that holds a pod's devices and the name its
// kubelet reports their health under: its first claim ("claim:<name>"), or
// the claim of its extended resources that a DRA DeviceClass serves (the
// resource's name); "" when it holds none (or p is nil).
func heldClaim(p *corev1.Pod) (claim string, resource corev1.ResourceName) {
	switch {
	case p == nil:
	case len(p.Status.ResourceClaimStatuses) > 0 && p.Status.ResourceClaimStatuses[0].ResourceClaimName != nil:
		st := p.Status.ResourceClaimStatuses[0]
		return *st.ResourceClaimName, corev1.ResourceName("claim:" + st.Name)
	case p.Status.ExtendedResourceClaimStatus != nil && len(p.Status.ExtendedResourceClaimStatus.RequestMappings) > 0:
		st := p.Status.ExtendedResourceClaimStatus
		return st.ResourceClaimName, corev1.ResourceName(st.RequestMappings[0].ResourceName)
	}
	return "", ""
}
