// Package jobintegration turns workloads into gangs with no extra YAML.
// Each kind (batch/v1 Job, JobSet, LeaderWorkerSet, the Kubeflow jobs,
// MPIJob, RayCluster and RayJob) is one folder implementing Integration and
// GenericJob, with optional interfaces for what only some kinds have
// (optional.go); Kueue pod groups are a GenericJob too (kueuegroup).
//
// Classify says what Lockstep makes of a job — not Lockstep's, another
// integration's child, an in-tree gang, a job naming its own group, not
// qualified (which condition failed and the fix), or a gang — for the job
// reconciler and the webhook's job and pod defaulting alike. The reconciler
// creates a gang's Workload and PodGroups, controlled by the job, and never
// adopts one of those names that the job does not control (control.go); a
// job that does not qualify gets an event saying why and is scheduled pod
// by pod. QuotaReconciler says on a gang's PodGroup when a ResourceQuota
// keeps its job's controller from creating its pods.
package jobintegration
