package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// A claim phase that fails leaves nothing assumed: the pods and the claims
// the placement would have written are forgotten, so the retry decides from
// the informers again instead of from its own stale assumption.
func TestFailedClaimPhaseForgetsItsAssumptions(t *testing.T) {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "1"}}
	client := fake.NewClientset(claim)
	client.PrependReactor("update", "resourceclaims", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("status.reservedFor: Forbidden: may not be specified when `allocated` is not set")
	})
	a := snapshot.NewCache(time.Minute, features.Default(), clock.RealClock{})
	b := newBinder(client, a, clock.RealClock{}, -1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}}
	stale := claim.DeepCopy()
	stale.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Driver: "d", Pool: "n", Device: "0"}}}}
	asgs := []placement.Assignment{{Pod: pod, Node: "n", Claims: []*resourcev1.ResourceClaim{stale}, NewlyAllocated: []bool{false}}}
	b.assume(asgs)
	if _, ok := a.AssumedNodes()[pod.UID]; !ok || claims(a) != 1 {
		t.Fatalf("assume: pod assumed %v, %d claims assumed", ok, claims(a))
	}
	if _, err := b.bind(context.Background(), asgs, nil); !errors.Is(err, errClaimWrite) {
		t.Fatalf("bind: %v, want a claim-write error", err)
	}
	if _, ok := a.AssumedNodes()[pod.UID]; ok || claims(a) != 0 {
		t.Errorf("after the failed claim phase: pod still assumed %v, %d claims still assumed", ok, claims(a))
	}
}

func claims(c *snapshot.Cache) int {
	_, n := c.Assumptions()
	return n
}
