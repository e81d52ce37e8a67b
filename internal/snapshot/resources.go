package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/lockstep-dev/lockstep/internal/features"
)

// Resources are amounts in the units the scheduler compares: milli-CPU,
// bytes, pod count, and integer extended resources.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Pods             int64
	Scalar           map[corev1.ResourceName]int64
}

// FromList converts a ResourceList.
func FromList(l corev1.ResourceList) Resources {
	var r Resources
	for name, q := range l {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case corev1.ResourcePods:
			r.Pods = q.Value()
		default:
			if r.Scalar == nil {
				r.Scalar = map[corev1.ResourceName]int64{}
			}
			r.Scalar[name] = q.Value()
		}
	}
	return r
}

// PodRequests is what a pod asks of a node: the effective requests over
// regular, init and sidecar containers plus pod overhead, pod-level
// resources where set, and for a running pod resized in place the larger of
// its spec and its allocated resources — computed by the helper with the
// options f gives (kube-scheduler's, for features.Default) — and one pod
// slot.
func PodRequests(pod *corev1.Pod, f features.Features) Resources {
	r := FromList(resourcehelper.PodRequests(pod, f.PodResourcesOptions()))
	r.Pods = 1
	return r
}

// Add adds o to r.
func (r *Resources) Add(o Resources) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	r.Pods += o.Pods
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[corev1.ResourceName]int64{}
		}
		r.Scalar[k] += v
	}
}

// Sub subtracts o from r.
func (r *Resources) Sub(o Resources) {
	neg := Resources{MilliCPU: -o.MilliCPU, Memory: -o.Memory, EphemeralStorage: -o.EphemeralStorage, Pods: -o.Pods}
	for k, v := range o.Scalar {
		if neg.Scalar == nil {
			neg.Scalar = map[corev1.ResourceName]int64{}
		}
		neg.Scalar[k] = -v
	}
	r.Add(neg)
}

// Insufficient lists the resources for which requested+req exceeds
// allocatable, in a stable order (cpu, memory, ephemeral-storage, pods, then
// extended resources as the request lists them).
func Insufficient(allocatable, requested, req Resources) []corev1.ResourceName {
	var out []corev1.ResourceName
	if req.MilliCPU > 0 && requested.MilliCPU+req.MilliCPU > allocatable.MilliCPU {
		out = append(out, corev1.ResourceCPU)
	}
	if req.Memory > 0 && requested.Memory+req.Memory > allocatable.Memory {
		out = append(out, corev1.ResourceMemory)
	}
	if req.EphemeralStorage > 0 && requested.EphemeralStorage+req.EphemeralStorage > allocatable.EphemeralStorage {
		out = append(out, corev1.ResourceEphemeralStorage)
	}
	if req.Pods > 0 && requested.Pods+req.Pods > allocatable.Pods {
		out = append(out, corev1.ResourcePods)
	}
	for name, v := range req.Scalar {
		if v > 0 && requested.Scalar[name]+v > allocatable.Scalar[name] {
			out = append(out, name)
		}
	}
	return out
}

// Clone returns a copy of r that shares nothing with it.
func (r Resources) Clone() Resources {
	if r.Scalar != nil {
		m := make(map[corev1.ResourceName]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			m[k] = v
		}
		r.Scalar = m
	}
	return r
}

// Equal reports whether r and o are the same amounts (a missing extended
// resource counts as zero).
func (r Resources) Equal(o Resources) bool {
	if r.MilliCPU != o.MilliCPU || r.Memory != o.Memory || r.EphemeralStorage != o.EphemeralStorage || r.Pods != o.Pods {
		return false
	}
	for k, v := range r.Scalar {
		if o.Scalar[k] != v {
			return false
		}
	}
	for k, v := range o.Scalar {
		if r.Scalar[k] != v {
			return false
		}
	}
	return true
}
