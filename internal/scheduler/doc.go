// Package scheduler is `lockstep scheduler`: the thin layer that turns
// informer events into units on a queue, builds a snapshot per cycle, asks
// package placement where a unit goes, and turns the answer into API writes
// (claim allocations, then bindings), PodGroup conditions and events.
//
// Crash safety. Writes for a unit go in two phases: first every claim
// allocation (status.allocation + reservedFor the pod), then every binding.
// Nothing else is written in between, so a crash leaves one of two states,
// both repaired on start-up before the first cycle (see recover.go):
//   - claims written, no member bound: the claims are released and the unit
//     is placed again from scratch;
//   - some members bound: the claims of the rest are kept, so those pods are
//     pinned to the devices already reserved for them and the next cycle
//     binds them; such units are scheduled first.
//
// Never is a device left allocated by Lockstep to a pod that is not bound
// once start-up recovery has run.
package scheduler
