// Package scheduler is `lockstep scheduler`: the thin layer that turns
// informer events into units on a queue, takes each cycle's view from
// internal/cycle, asks decide.Decide what to do with the unit, and turns
// the Decision into API writes (claim allocations, then bindings;
// evictions and a nomination), PodGroup conditions, pod conditions and
// events, and exactly one queue transition.
//
// One path. Every unit is a scheduling tree: a lone pod or a flat
// PodGroup is a tree of one leaf, a CompositePodGroup's tree is keyed by
// its root (pods and groups map to that key through the caches, unitKey).
// resolve reads it, scheduleOne decides it, execute and bind carry the
// decision out; the reports write each group's conditions as a flat
// group's and, for a tree, each composite's.
//
// Crash safety. Writes for a unit go in phases, each finished for every
// member before the next starts: volumes (PersistentVolume bindings), then
// claims (claims for extended resources created; every allocation and
// reservation written; device binding conditions waited for), then
// bindings. A crash leaves one of two states, both repaired on start-up
// before the first cycle (see recover.go):
//   - claims written, no member bound: the claims are released and the unit
//     is placed again from scratch;
//   - some members bound: the claims of the rest are kept, so those pods are
//     pinned to the devices already reserved for them and the next cycle
//     binds them.
//
// Never is a device left allocated by Lockstep to a pod that is not bound
// once start-up recovery has run; a binding that fails part way releases
// the claims of the pods it did not bind at once.
package scheduler
