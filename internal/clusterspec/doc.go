// Package clusterspec defines the cluster spec file of the local control plane:
// node pools with capacity, labels, taints and simulated DRA devices. It turns
// a spec into the Nodes, ResourceSlices and DeviceClasses that `lockstep dev up`
// creates, and knows nothing about processes or the API server.
//
// The file format is documented in docs/cluster-spec.md; examples live in
// examples/clusters/.
package clusterspec
