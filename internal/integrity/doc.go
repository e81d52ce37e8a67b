// Package integrity is the gang integrity controller: atomic death. A
// running gang whose disruptionMode is all (Lockstep's default) that loses a
// member — pod deleted, evicted or failed, its node gone or NotReady past a
// grace period, a device its claims hold tainted NoExecute, a device its
// kubelet reports Unhealthy (pod status allocatedResourcesStatus; Unknown is
// not a loss) — has its remaining members evicted, so its devices are
// released at once and no group sits partially alive; the reason is recorded on the PodGroup
// (DisruptionTarget condition, event, lockstep_gang_restarts_total) and the
// group is scheduled whole again when its controller recreates the pods.
// With disruptionMode single, only a member on an Unhealthy device is taken
// down, alone; a member on an Unhealthy device is told of on its pod and
// group, naming the device (DeviceUnhealthy, lockstep_unhealthy_devices_total).
// A group of a scheduling tree restarts with it: every other group under the
// highest CompositePodGroup above it whose disruptionMode is all, up an
// unbroken chain of them, has its running incarnation ended
// (TreeMemberLost) and its members evicted; a parent with disruptionMode
// single keeps the restart to the group. A group that finished, whose owner
// stopped it, that was preempted, or that its owner deleted restarts no one.
//
// Binding a gang is not atomic in Kubernetes (pods bind one by one), so a
// gang seen partly bound is only restarted when it is still partial after
// settleDelay: a gang being bound is not mistaken for one that lost a member.
//
// The controller's informer caches are not synced with each other (after an
// API server restart one can catch up seconds after another), so a member
// the pod cache does not hold, or a node the node cache does not hold or
// shows NotReady past the grace period, is read from the API server before
// a verdict rests on it (Confirmed); evictions are only of pods the cache
// holds.
package integrity
