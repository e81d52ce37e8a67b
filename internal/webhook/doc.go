// Package webhook is `lockstep webhook`: admission for Lockstep's objects and
// for pods and Jobs that target Lockstep. It manages its own serving
// certificate (a Secret in lockstep-system shared by replicas) and writes the
// caBundle into the webhook configurations it owns.
//
// Every webhook selects only Lockstep's objects or, through matchConditions,
// pods and Jobs whose schedulerName is lockstep (or that carry the membership
// label), so an outage never blocks unrelated workloads; and an update
// reaches a validating webhook only when it changes what that webhook
// judges, so an outage does not block the Job controller or Kueue on
// Lockstep's own pods and Jobs either. An admission policy (CAPolicy)
// confines the webhook's own identity to the caBundle of its
// configurations. See docs/admission.md for each webhook's failurePolicy
// and why.
package webhook
