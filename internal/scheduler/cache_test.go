package scheduler

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A claim the scheduler created is held (assumed) until the informer shows
// it, and not after it was deleted; an assumed existing claim that the
// informer no longer has is not brought back.
func TestOverlayCreatedClaims(t *testing.T) {
	alloc := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Driver: "d", Pool: "p", Device: "0"}}}}
	created := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-extended-resources-abcde", Annotations: map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}},
		Status:     resourcev1.ResourceClaimStatus{Allocation: alloc, ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}},
	}
	existing := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "template-claim"}, Status: created.Status}
	a := newAssumed(time.Minute)
	a.assumeClaim(created, false)
	a.assumeClaim(existing, false)

	_, got := a.overlay(nil, nil)
	if len(got) != 1 || got[0] != created {
		t.Fatalf("before the informer shows it: overlay %v, want only the created claim", names(got))
	}
	_, got = a.overlay(nil, []*resourcev1.ResourceClaim{created})
	if len(got) != 1 {
		t.Fatalf("informer shows it: overlay %v", names(got))
	}
	a.assumeClaim(created, false)
	a.forgetClaim(types.NamespacedName{Namespace: "ns", Name: created.Name})
	if _, got = a.overlay(nil, nil); len(got) != 0 {
		t.Errorf("after deletion: overlay %v, want nothing", names(got))
	}
}

func names(cs []*resourcev1.ResourceClaim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
