// Package devcluster runs the local control plane: etcd, kube-apiserver,
// kube-controller-manager (all v1.37, built from k8s.io/kubernetes into bin/)
// and kwok as the node simulator, on loopback addresses, with the Nodes,
// ResourceSlices and DeviceClasses of a cluster spec (package clusterspec).
//
// Lifecycle of a state directory (default .lockstep/dev):
//
//	        Up                       Down
//	empty ──────► running (state.json, ──────► empty (logs/ kept)
//	  ▲           pids, pki, etcd data)          │
//	  └──────────────────────────────────────────┘
//
// Up refuses when state.json names a live process or a port is taken; a
// stale state.json (every process gone) is cleaned up first. Processes are
// started in their own process group and recorded in state.json, so Down can
// stop exactly what Up started, from another process.
//
// Supervise keeps a running cluster's components running, as a kubelet
// does a pod's containers: one that exits is started again (same
// arguments, log appended) after a back-off, and its new pid recorded. The
// supervisor records itself in state.json too, and Down stops it first.
package devcluster
