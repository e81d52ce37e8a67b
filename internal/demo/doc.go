// Package demo is `lockstep demo` (`make demo`): the seed 004 scenario on the
// local control plane under three schedulers — kube-scheduler v1.37 pod by
// pod, kube-scheduler v1.37 with the in-tree gang (upstream profile), and
// Lockstep (eks profile, no gate) — and one comparison table.
package demo
