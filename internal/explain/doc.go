// Package explain answers "why is my gang pending?" for a PodGroup, Job or
// pod. It walks the diagnosis order operators use (seed 003) and computes
// the answer with the scheduler's own decision core — the same snapshot,
// placement and summary code — on a fresh read of the cluster, so explain
// and the scheduler cannot disagree about why something does not fit.
package explain
