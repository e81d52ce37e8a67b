// Package apidiscovery answers one question the scheduler, preflight, the
// local control plane and the tests all ask: does the API server serve this
// resource in this group version?
package apidiscovery

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// Serves reports whether resource is served in groupVersion (e.g.
// "scheduling.k8s.io/v1beta1", "podgroups"). A group version the server
// does not know is not an error: it is simply not served.
func Serves(d discovery.DiscoveryInterface, groupVersion, resource string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", groupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}
