// Package audit reads what a cluster's objects say about partial starts:
// which workloads ran some of their pods while others they needed were
// pending, what devices those pods held meanwhile, which of them hold what
// another needs now (deadlocked), and which preemptions left a workload
// partly alive. It is pure: Analyze takes lists of objects (pods, their
// claims, the jobs that own them, preemption events) and a time, and
// returns a Report; it reads no cluster and writes none.
//
// The pipeline:
//
//	group      pods → workloads: the job of an integrated kind that owns
//	           them (jobintegration's OwnerOf), else their PodGroup, else
//	           their controller; replicas of ReplicaSets and DaemonSets are
//	           independent and not audited.
//	require    how many pods the workload needs running together: its
//	           gangs' minCounts as jobintegration would make them, a Job
//	           whose pods are independent (completions ≠ parallelism) 1, else
//	           every pod it had at once.
//	timeline   each pod's spans from its timestamps — pending from creation
//	           to its PodScheduled=True time, holding from then to its end
//	           (the last container's finishedAt) or now — and its devices:
//	           extended resources of device plugins from its requests, DRA
//	           devices from its claims' allocations (a claim shared by
//	           several pods counts once).
//	events     Preempted events tied to their pods: by UID, or for a pod
//	           that is gone by its name (a replacement's generateName, a
//	           StatefulSet pod's name), which adds a span standing for it.
//	sweep      one pass over the workload's events in time order: a pod
//	           created after the workload had run whole for Grace and growing
//	           it past its largest size is a scale-up, not needed to run;
//	           the workload is partial while it holds pods, a needed pod is
//	           pending, and fewer than it requires run or finished. A partial
//	           episode that is over counts if it lasted Grace (shorter is a
//	           scheduler binding a job pod by pod); one going on now counts
//	           at once if the scheduler found its waiting pods unschedulable.
//	judge      deadlocks among the workloads partial now (a cycle of
//	           "its unschedulable pods need a resource the other holds"),
//	           takedowns that left survivors short of the requirement, and
//	           whether Lockstep would make the workload gangs
//	           (jobintegration.Groups, as its reconciler would).
//
// Everything is reconstructed from the objects that still exist at the
// audit: pods deleted before it, and events past the API server's event
// TTL, are not seen; Report.Window and Report.Estimates say so.
package audit
