package harness

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
