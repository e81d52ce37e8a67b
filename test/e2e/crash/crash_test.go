package crash

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const gangSize = 64

func createGang(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, n int) {
	t.Helper()
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, group, int32(n)))
	for i := 0; i < n; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i)).Member(group).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "every member's claim generated", func(ctx context.Context) (bool, string, error) {
		claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(claims.Items) == n, fmt.Sprintf("%d claims", len(claims.Items)), nil
	})
}

// consistent checks the invariants: every allocated claim belongs to a bound
// pod on the node of its device, and no device is allocated twice.
func consistent(ctx context.Context, h *harness.Harness, ns string) error {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	node := map[string]string{}
	for _, p := range pods.Items {
		node[string(p.UID)] = p.Spec.NodeName
	}
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	seen := map[string]string{}
	for _, c := range claims.Items {
		a := c.Status.Allocation
		if a == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if node[string(r.UID)] == "" {
				return fmt.Errorf("claim %s is allocated to %s, which is not bound", c.Name, r.Name)
			}
			if pool := a.Devices.Results[0].Pool; node[string(r.UID)] != pool {
				return fmt.Errorf("claim %s: pod %s on %s but its device is on %s", c.Name, r.Name, node[string(r.UID)], pool)
			}
		}
		if len(c.Status.ReservedFor) == 0 {
			return fmt.Errorf("claim %s is allocated but reserved for nobody", c.Name)
		}
		for _, r := range a.Devices.Results {
			id := r.Pool + "/" + r.Device
			if other, dup := seen[id]; dup {
				return fmt.Errorf("device %s allocated to both %s and %s", id, other, c.Name)
			}
			seen[id] = c.Name
		}
	}
	return nil
}

func TestCrashMidBindingLeavesGangWholeOrNothing(t *testing.T) {
	tests := map[string]struct {
		crashAfterBinds string
		wantBoundAtMost int
	}{
		"after the claim writes, before any binding": {crashAfterBinds: "0", wantBoundAtMost: 0},
		"after 20 of 64 bindings":                    {crashAfterBinds: "20", wantBoundAtMost: gangSize - 1},
	}
	h := harness.Get(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := h.Namespace(t)
			ctx := harness.Context(t, 4*time.Minute)
			createGang(t, ctx, h, ns, "big", gangSize)

			crashy := h.StartScheduler(t, "crashy-"+tc.crashAfterBinds, nil, "--leader-elect=false", "--test-crash-after-binds="+tc.crashAfterBinds)
			select {
			case <-crashy.Done:
			case <-ctx.Done():
				t.Fatal("the scheduler never reached the crash point")
			}
			if crashy.ExitCode != 3 {
				t.Fatalf("scheduler exited with %d, want 3 (the crash hook)", crashy.ExitCode)
			}
			_, bound, err := h.GroupPods(ctx, ns, "big")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("at the crash: %d of %d bound", bound, gangSize)
			if bound > tc.wantBoundAtMost {
				t.Fatalf("crash point not mid-binding: %d bound", bound)
			}

			h.StartScheduler(t, "recovered-"+tc.crashAfterBinds, nil, "--leader-elect=false")
			harness.Eventually(t, ctx, "the whole gang bound after restart", func(ctx context.Context) (bool, string, error) {
				_, bound, err := h.GroupPods(ctx, ns, "big")
				return bound == gangSize, fmt.Sprintf("%d bound", bound), err
			})
			harness.Eventually(t, ctx, "claims consistent with bindings", func(ctx context.Context) (bool, string, error) {
				err := consistent(ctx, h, ns)
				if err != nil {
					return false, err.Error(), nil
				}
				return true, "", nil
			})
		})
	}
}

func gang(ns, name string, n int32) *lockv1.PodGroup { return builders.GangPodGroup(ns, name, n) }

func createMember(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, i int) {
	t.Helper()
	p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i)).Member(group).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
