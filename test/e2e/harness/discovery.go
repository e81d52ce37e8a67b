package harness

import (
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
)

// ServesGroupVersion reports whether the API server serves resource in
// groupVersion (e.g. "scheduling.k8s.io/v1beta1", "podgroups").
func ServesGroupVersion(c kubernetes.Interface, groupVersion, resource string) (bool, error) {
	return apidiscovery.Serves(c.Discovery(), groupVersion, resource)
}
