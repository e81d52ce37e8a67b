// Package cycle assembles what one scheduling cycle sees, in one place,
// for every caller that decides: the scheduler, `lockstep explain`, the
// golden scenario tests and the benchmarks. A cycle sees
//
//   - the cached cluster (snapshot.Cache) kept current by informer events
//     (Watch): nodes, pods, claims, DeviceClasses, and ResourceSlices with
//     DeviceTaintRules applied by the tracker kube-scheduler uses
//     (k8s.io/dynamic-resource-allocation/resourceslice/tracker);
//   - the decisions being written, assumed in the cache by the binder;
//   - kube-scheduler's own pod filters (InterPodAffinity,
//     PodTopologySpread, volumes) over that state (internal/kubefilter);
//   - the capacity nominated to preemptors of at least the unit's
//     priority (snapshot.Nomination), including nominations rebuilt from
//     pods' status.nominatedNodeName (RestoreNominations).
//
// State.Snapshot returns that view for one unit. Because explain builds
// its view through the same Watch and State as the scheduler, the two
// cannot disagree about what is free.
package cycle
