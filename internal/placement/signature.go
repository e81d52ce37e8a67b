package placement

import (
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"

	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// signatureOf is a key equal for pods that every filter treats the same
// (req: the pod's requests, snapshot.PodRequests). An unallocated claim of
// the pod's own contributes its spec (each pod of an Indexed Job has its
// own claim from the same template, and those are interchangeable, as are
// claims created by hand one per pod); an allocated claim, or one shared
// (reserved for other pods, or used by other members: shared), contributes
// its name, since it pins the pod.
func signatureOf(pod *corev1.Pod, req snapshot.Resources, claims []*resourcev1.ResourceClaim, f features.Features, shared func(*resourcev1.ResourceClaim) bool) string {
	type claimKey struct {
		Name string                        `json:"n,omitempty"`
		Spec *resourcev1.ResourceClaimSpec `json:"s,omitempty"`
	}
	sig := struct {
		NodeName    string
		Selector    map[string]string
		Affinity    *corev1.NodeAffinity
		Tolerations []corev1.Toleration
		Requests    snapshot.Resources
		Ports       []string
		Claims      []claimKey
		// Features: the node features the pod requires (restart rules,
		// user namespaces with host network, …).
		Features []string
	}{
		NodeName:    pod.Spec.NodeName,
		Selector:    pod.Spec.NodeSelector,
		Tolerations: pod.Spec.Tolerations,
		Requests:    req,
		Ports:       snapshot.HostPorts(pod),
	}
	if pod.Spec.Affinity != nil {
		sig.Affinity = pod.Spec.Affinity.NodeAffinity
	}
	if fs, err := requiredFeatures(pod, f); err == nil && !fs.IsEmpty() {
		sig.Features, _ = ndf.DefaultFramework.Unmap(fs)
	}
	for _, c := range claims {
		if c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0 || shared(c) {
			sig.Claims = append(sig.Claims, claimKey{Name: c.Namespace + "/" + c.Name})
			continue
		}
		sig.Claims = append(sig.Claims, claimKey{Spec: &c.Spec})
	}
	b, _ := json.Marshal(sig)
	return string(b)
}

// Signatures remembers the signatures of one unit's members. A member's
// signature is computed from its pod, its claims and the features of the
// snapshot; it is reused while the member's pod and claims are the same
// objects (snapshot objects are never changed in place: a changed claim
// is a new object) under the same features. Not safe for concurrent use,
// as placements of a unit are not.
type Signatures struct {
	known []knownSignature
}

type knownSignature struct {
	pod      *corev1.Pod
	claims   []*resourcev1.ResourceClaim
	features features.Features
	sig      string
}

// NewSignatures returns an empty memory of signatures, for one unit's
// members.
func NewSignatures() *Signatures { return &Signatures{} }

// signature is member i's signature, computed by compute unless known.
func (s *Signatures) signature(i int, pod *corev1.Pod, claims []*resourcev1.ResourceClaim, f features.Features, compute func() string) string {
	if s == nil {
		return compute()
	}
	if i < len(s.known) {
		if k := s.known[i]; k.pod == pod && k.features == f && slices.Equal(k.claims, claims) {
			return k.sig
		}
	} else {
		s.known = append(s.known, make([]knownSignature, i+1-len(s.known))...)
	}
	sig := compute()
	s.known[i] = knownSignature{pod: pod, claims: slices.Clone(claims), features: f, sig: sig}
	return sig
}
