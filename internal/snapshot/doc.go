// Package snapshot is the in-memory state one scheduling cycle decides on:
// nodes with what is requested on them, the DRA inventory (ResourceSlices
// with DeviceTaintRules applied, DeviceClasses), every device already
// allocated or shared, and the capacity held for preemptors (nominations).
// A Cache keeps it current from informer events and from the scheduler's
// own decisions (assumed bindings and claims, nominations); Update brings
// the one snapshot a cycle uses up to date, undoing what the previous cycle
// did to it, so building one costs what changed, not the cluster
// (cycle.State.Snapshot then holds the other units' nominations). New
// builds one from lists of objects. It never calls the API server, so the
// same decision code runs in the scheduler, in tests, in benchmarks, in
// `lockstep explain` and in `lockstep simulate` (internal/cycle).
//
// A Snapshot is owned by one cycle: placement mutates it as it places pods
// (Assume), so later members of the same group see what earlier ones took.
package snapshot
