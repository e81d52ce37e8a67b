package devcluster

import (
	"fmt"
	"strings"
)

// Profile selects which Kubernetes feature gates the control plane runs with.
type Profile string

const (
	// ProfileEKS turns on only default-on gates, like a managed control plane
	// (Amazon EKS, GKE, AKS) where no gate can be set.
	ProfileEKS Profile = "eks"
	// ProfileUpstream is a self-managed 1.37 cluster with the in-tree
	// workload-aware scheduling turned on: the reference Lockstep is compared
	// against.
	ProfileUpstream Profile = "upstream"
)

// Profiles lists the valid profiles.
var Profiles = []Profile{ProfileEKS, ProfileUpstream}

// ParseProfile validates a --profile value.
func ParseProfile(s string) (Profile, error) {
	for _, p := range Profiles {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown profile %q: want one of %v", s, Profiles)
}

// FeatureGates is the --feature-gates value every component of the profile
// gets (apiserver, controller-manager and scheduler all read these gates;
// setting one on only some components silently drops or ignores fields).
func (p Profile) FeatureGates() string {
	if p != ProfileUpstream {
		return ""
	}
	return strings.Join([]string{
		"CompositePodGroup=true",
		"DRAWorkloadResourceClaims=true",
		"GenericWorkload=true",
		"TopologyAwareWorkloadScheduling=true",
		"WorkloadWithJob=true",
	}, ",")
}

// RuntimeConfig is the kube-apiserver --runtime-config value.
func (p Profile) RuntimeConfig() string {
	if p != ProfileUpstream {
		return ""
	}
	return "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"
}
