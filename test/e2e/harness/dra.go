package harness

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
