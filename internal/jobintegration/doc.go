// Package jobintegration turns workloads into gangs with no extra YAML: one
// generic reconciler creates a Workload and a PodGroup, owned by the job, for
// every job that targets Lockstep and has the fixed shape a gang needs; a job
// that does not qualify gets an event saying which condition failed and how
// to fix it, and is scheduled pod by pod.
//
// Each integration (batch/v1 Job now; JobSet, PyTorchJob, MPIJob,
// LeaderWorkerSet later) is one folder implementing GenericJob.
package jobintegration
