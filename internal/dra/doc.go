// Package dra allocates devices for a pod's ResourceClaims on one node of a
// snapshot, with k8s.io/dynamic-resource-allocation/structured — the
// allocator kube-scheduler, Cluster Autoscaler and Karpenter use (CEL
// selectors, ExactCount and All, matchAttribute constraints, device taints,
// partitionable devices, prioritized lists). It also counts devices of a class
// for status messages.
package dra
