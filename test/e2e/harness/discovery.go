package harness

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
)

// ServesGroupVersion reports whether the API server serves resource in
// groupVersion (e.g. "scheduling.k8s.io/v1beta1", "podgroups").
func ServesGroupVersion(c kubernetes.Interface, groupVersion, resource string) (bool, error) {
	list, err := c.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}
