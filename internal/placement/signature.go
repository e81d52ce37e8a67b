package placement

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"

	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// signatureOf is a key equal for pods that every filter treats the same. An
// unallocated claim of the pod's own contributes its spec (each pod of an
// Indexed Job has its own claim from the same template, and those are
// interchangeable, as are claims created by hand one per pod); an
// allocated claim, or one shared (reserved for other pods, or used by
// other members: shared), contributes its name, since it pins the pod.
func signatureOf(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, f features.Features, shared func(*resourcev1.ResourceClaim) bool) string {
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
		Requests:    snapshot.PodRequests(pod, f),
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
