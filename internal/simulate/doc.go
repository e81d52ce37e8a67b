// Package simulate replays a workload on a cluster in virtual time under
// several schedulers, each deciding with Lockstep's own decision core, and
// reports what each costs. Its pipeline:
//
//	cluster spec ─ClusterFromSpec─▶ Cluster (nodes, ResourceSlices, DeviceClasses)
//	YAML docs ─workload.Load─▶ workload.Workload: Jobs, each with its pods as
//	               its controller makes them and its gangs as Lockstep's
//	               integration makes them (PodGroups, or a tree's root
//	               CompositePodGroup over them)
//	          ─Check─▶ refused before anything runs if a job can never fit
//	Run ─▶ one world per Model (engine.go), events in time order:
//	          arrive ─▶ makeGroups, createPod ─▶ units queued (units.go)
//	          after each instant, pass: resolve ─▶ decide.Decide ─▶ bind |
//	          preempt | park (apply.go); fail/repair ─▶ integrity.Decide
//	          restarts (failure.go); the recorder samples (record.go)
//	    ─buildReport─▶ report.Report ─▶ report.WriteTable, JSON, report.WriteHTML
//
// Sub-packages: workload loads and checks what a user would apply (every
// kind's builder, the annotations, failures and generated mixes); report
// is the result and its renderings, a function of the report alone.
//
// Every unit is what the scheduler places: a lone pod, a PodGroup, or a
// scheduling tree (a Ray cluster, an elastic Kubeflow job, an MPIJob with
// a launcher) decided whole from its root by the same decide.Decide the
// scheduler, explain and the golden scenarios call. The models differ only
// in how jobs are grouped (Model.groups, Model.tree), whether DRA devices
// may be preempted, and whether a gang that lost a member restarts.
package simulate
