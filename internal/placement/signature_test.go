package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A member's remembered signature is reused only while its pod, its claims
// and the features are the same; any of them changed (a claim allocated
// is a new object) computes it again.
func TestSignaturesRemembered(t *testing.T) {
	pod := builders.MakePod().Namespace("ml").Name("r-0").Req(corev1.ResourceCPU, "1").Obj()
	claim := builders.Claim("ml", "r-0-gpu", "gpu.example.com", 1)
	allocated := claim.DeepCopy()
	allocated.Status.Allocation = &resourcev1.AllocationResult{}
	other := pod.DeepCopy()
	gated := features.Default()
	gated.PodLevelResources = !gated.PodLevelResources

	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		claims   []*resourcev1.ResourceClaim
		features features.Features
		computed bool
	}{
		{name: "the same objects: remembered", pod: pod, claims: []*resourcev1.ResourceClaim{claim}, features: features.Default()},
		{name: "the claim changed", pod: pod, claims: []*resourcev1.ResourceClaim{allocated}, features: features.Default(), computed: true},
		{name: "a claim more", pod: pod, claims: []*resourcev1.ResourceClaim{claim, allocated}, features: features.Default(), computed: true},
		{name: "another pod object", pod: other, claims: []*resourcev1.ResourceClaim{claim}, features: features.Default(), computed: true},
		{name: "other features", pod: pod, claims: []*resourcev1.ResourceClaim{claim}, features: gated, computed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSignatures()
			s.signature(3, pod, []*resourcev1.ResourceClaim{claim}, features.Default(), func() string { return "first" })
			computed := false
			got := s.signature(3, tc.pod, tc.claims, tc.features, func() string { computed = true; return "second" })
			if computed != tc.computed {
				t.Errorf("computed again: %v, want %v", computed, tc.computed)
			}
			if want := map[bool]string{false: "first", true: "second"}[tc.computed]; got != want {
				t.Errorf("signature %q, want %q", got, want)
			}
		})
	}
	// Without a memory every signature is computed.
	var none *Signatures
	n := 0
	for range 2 {
		none.signature(0, pod, nil, features.Default(), func() string { n++; return "" })
	}
	if n != 2 {
		t.Errorf("computed %d times without a memory, want 2", n)
	}
}
