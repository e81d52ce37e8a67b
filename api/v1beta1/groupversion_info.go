package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this package.
var GroupVersion = schema.GroupVersion{Group: "scheduling.lockstep.dev", Version: "v1beta1"}

// SchemeGroupVersion is GroupVersion under the name client-gen's typed
// client (internal/client) refers to.
var SchemeGroupVersion = GroupVersion

// SchemeBuilder registers the types of this package.
var SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Workload{}, &WorkloadList{}, &PodGroup{}, &PodGroupList{}, &CompositePodGroup{}, &CompositePodGroupList{})
	metaAddToGroupVersion(s)
	return nil
})

// AddToScheme adds the types of this package to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme
