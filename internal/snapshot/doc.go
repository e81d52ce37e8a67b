// Package snapshot is the in-memory state one scheduling cycle decides on:
// nodes with what is requested on them, the DRA inventory (ResourceSlices,
// DeviceClasses) and every device already allocated. A Cache keeps it
// current from informer events and from the scheduler's own decisions
// (assumed, and nominated); New builds one from lists of objects. It never
// calls the API server, so the same decision code runs in the scheduler,
// in tests, in benchmarks and in `lockstep explain` (internal/cycle).
//
// A Snapshot is owned by one cycle: placement mutates it as it places pods
// (Assume), so later members of the same group see what earlier ones took.
package snapshot
