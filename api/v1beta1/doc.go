// Package v1beta1 is the scheduling.lockstep.dev/v1beta1 API: Workload and
// PodGroup, field for field and JSON name for JSON name the same as
// scheduling.k8s.io/v1beta1 in Kubernetes 1.37, so a manifest ports by
// changing its apiVersion. They are served as CRDs, so they work on any
// cluster from 1.34 on with no feature gate.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.lockstep.dev
package v1beta1
