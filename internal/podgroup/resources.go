package podgroup

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Resource is the GVR of Lockstep's PodGroup.
var Resource = lockv1.GroupVersion.WithResource("podgroups")

// UpstreamResource is the in-tree PodGroup (scheduling.k8s.io/v1beta1),
// served where GenericWorkload is on. It has the same fields and JSON as
// Lockstep's (but no status.incarnation), so Lockstep schedules pods that
// point at one through spec.schedulingGroup (e.g. the Job controller's,
// under WorkloadWithJob).
var UpstreamResource = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}

// ResourceOf is where a group read from either API lives (by apiVersion).
func ResourceOf(pg *lockv1.PodGroup) schema.GroupVersionResource {
	if pg.APIVersion == UpstreamResource.GroupVersion().String() {
		return UpstreamResource
	}
	return Resource
}

// Upstream reports whether the group is an in-tree scheduling.k8s.io one.
func Upstream(pg *lockv1.PodGroup) bool { return ResourceOf(pg) == UpstreamResource }

// Scheme knows the core and Lockstep types (for clients, events and conversions).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lockv1.AddToScheme(s)
	return s
}

// FromUnstructured converts a PodGroup of either API.
func FromUnstructured(u *unstructured.Unstructured) (*lockv1.PodGroup, error) {
	pg := &lockv1.PodGroup{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pg); err != nil {
		return nil, err
	}
	return pg, nil
}

// ToUnstructured converts a PodGroup for the API it was read from.
func ToUnstructured(pg *lockv1.PodGroup) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pg)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(ResourceOf(pg).GroupVersion().WithKind("PodGroup"))
	return u, nil
}

// CompositeResource is the GVR of Lockstep's CompositePodGroup.
var CompositeResource = lockv1.GroupVersion.WithResource("compositepodgroups")

// UpstreamCompositeResource is the in-tree CompositePodGroup
// (scheduling.k8s.io/v1alpha3), served where the CompositePodGroup gate is
// on; same fields and JSON as Lockstep's.
var UpstreamCompositeResource = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1alpha3", Resource: "compositepodgroups"}

// CompositeResourceOf is where a CompositePodGroup read from either API
// lives (by apiVersion).
func CompositeResourceOf(c *lockv1.CompositePodGroup) schema.GroupVersionResource {
	if c.APIVersion == UpstreamCompositeResource.GroupVersion().String() {
		return UpstreamCompositeResource
	}
	return CompositeResource
}

// CompositeFromUnstructured converts a CompositePodGroup of either API.
func CompositeFromUnstructured(u *unstructured.Unstructured) (*lockv1.CompositePodGroup, error) {
	c := &lockv1.CompositePodGroup{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c); err != nil {
		return nil, err
	}
	return c, nil
}

// CompositeToUnstructured converts a CompositePodGroup for the API it was
// read from.
func CompositeToUnstructured(c *lockv1.CompositePodGroup) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(CompositeResourceOf(c).GroupVersion().WithKind("CompositePodGroup"))
	return u, nil
}
