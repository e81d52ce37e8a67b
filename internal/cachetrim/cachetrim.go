// Package cachetrim is the transform every Lockstep informer applies before
// an object enters its cache: it drops what no component reads, so memory
// follows the objects, not their bookkeeping. managedFields (often larger
// than the object it describes) go from every object, and a Node's
// status.images (up to 50 image names and sizes per node on a real cluster;
// Lockstep does not score image locality) from Nodes.
//
// Cached objects written back with Update keep their managedFields on the
// server: a request without the field leaves it as it is.
package cachetrim

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// Transform trims obj in place and returns it; objects it does not know
// pass through.
func Transform(obj any) (any, error) {
	if o, err := meta.Accessor(obj); err == nil && o.GetManagedFields() != nil {
		o.SetManagedFields(nil)
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return obj, nil
}

var _ cache.TransformFunc = Transform
