package crash

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// A crash after the claims for extended resources were created and
// allocated, before any pod was bound: the restarted scheduler deletes those
// claims (they hold devices for pods that are not bound) and binds the gang
// whole with claims of its own.
func TestCrashAfterExtendedResourceClaims(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-extended"},
		Spec: resourcev1.DeviceClassSpec{
			Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}},
			ExtendedResourceName: ptr.To("example.com/gpu"),
		},
	}
	if _, err := h.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.ResourceV1().DeviceClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	const n = 16
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "ext", n))
	for i := 0; i < n; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("ext-%d", i)).Member("ext").Req(corev1.ResourceCPU, "1").Req("example.com/gpu", "1").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crashy := h.StartScheduler(t, "crashy-ext", nil, "--leader-elect=false", "--test-crash-after-binds=0")
	select {
	case <-crashy.Done:
	case <-ctx.Done():
		t.Fatal("the scheduler never reached the crash point")
	}
	if crashy.ExitCode != 3 {
		t.Fatalf("scheduler exited with %d, want 3 (the crash hook)", crashy.ExitCode)
	}
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := sets.New[string]()
	for _, c := range claims.Items {
		if c.Status.Allocation != nil {
			before.Insert(c.Name)
		}
	}
	if before.Len() != n {
		t.Fatalf("at the crash: %d allocated claims, want the %d created for the gang", before.Len(), n)
	}

	h.StartScheduler(t, "recovered-ext", nil, "--leader-elect=false")
	harness.Eventually(t, ctx, "the gang bound whole, with new claims only", func(ctx context.Context) (bool, string, error) {
		pods, bound, err := h.GroupPods(ctx, ns, "ext")
		if err != nil || bound < n {
			return false, fmt.Sprintf("%d bound", bound), err
		}
		claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		names := sets.New[string]()
		for _, c := range claims.Items {
			if before.Has(c.Name) {
				return false, fmt.Sprintf("claim %s of the crashed attempt still exists", c.Name), nil
			}
			names.Insert(c.Name)
		}
		for _, p := range pods {
			st := p.Status.ExtendedResourceClaimStatus
			if st == nil || !names.Has(st.ResourceClaimName) {
				return false, fmt.Sprintf("pod %s does not name an existing claim", p.Name), nil
			}
		}
		if err := consistent(ctx, h, ns); err != nil {
			return false, err.Error(), nil
		}
		return len(claims.Items) == n, fmt.Sprintf("%d claims", len(claims.Items)), nil
	})
}
