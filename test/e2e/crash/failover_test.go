package crash

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestFailoverToSecondReplica(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	fast := []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}
	replicas := map[string]*harness.SchedulerProcess{
		"replica-a": h.StartScheduler(t, "replica-a", nil, fast...),
		"replica-b": h.StartScheduler(t, "replica-b", nil, fast...),
	}
	leader := waitLeader(t, ctx, h, "")
	createGang(t, ctx, h, ns, "first", 4)
	harness.Eventually(t, ctx, "first gang bound by the leader", func(ctx context.Context) (bool, string, error) {
		_, bound, err := h.GroupPods(ctx, ns, "first")
		return bound == 4, fmt.Sprintf("%d bound", bound), err
	})

	if err := replicas[leader].Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-replicas[leader].Done
	successor := waitLeader(t, ctx, h, leader)
	t.Logf("leader %s killed; %s took over", leader, successor)

	// The second gang needs the new leader (its pods share the template).
	for i := 0; i < 4; i++ {
		createMember(t, ctx, h, ns, "second", i)
	}
	h.CreatePodGroup(ctx, t, gang(ns, "second", 4))
	harness.Eventually(t, ctx, "second gang bound by the new leader", func(ctx context.Context) (bool, string, error) {
		_, bound, err := h.GroupPods(ctx, ns, "second")
		return bound == 4, fmt.Sprintf("%d bound", bound), err
	})
}

// waitLeader waits for a Lease holder other than not.
func waitLeader(t *testing.T, ctx context.Context, h *harness.Harness, not string) string {
	t.Helper()
	var holder string
	harness.Eventually(t, ctx, "a leader other than "+not, func(ctx context.Context) (bool, string, error) {
		l, err := h.Client.CoordinationV1().Leases("lockstep-system").Get(ctx, "lockstep-scheduler", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if l.Spec.HolderIdentity == nil {
			return false, "no holder", nil
		}
		holder = *l.Spec.HolderIdentity
		return holder != "" && holder != not, "holder " + holder, nil
	})
	return holder
}
