package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func metaAddToGroupVersion(s *runtime.Scheme) { metav1.AddToGroupVersion(s, GroupVersion) }

// Labels and annotations of the API.
const (
	// PodGroupLabel on a pod names the PodGroup (same namespace) the pod belongs to.
	PodGroupLabel = "scheduling.lockstep.dev/pod-group"
	// SchedulerName is the schedulerName Lockstep serves.
	SchedulerName = "lockstep"

	// PreferredTopologyAnnotation on a PodGroup (or a workload, which
	// passes it to its groups) lists node label keys, narrowest first,
	// comma-separated: the group is tried in one domain of the first, then
	// of the next, and so on, before it falls back to its required
	// topology (spec.schedulingConstraints.topology) or to any node. A
	// Lockstep extension: upstream has no preferred level.
	PreferredTopologyAnnotation = "scheduling.lockstep.dev/preferred-topology"
	// RequiredTopologyAnnotation on a workload (Job, JobSet, …) lists the
	// node label keys its groups get as spec.schedulingConstraints.topology.
	RequiredTopologyAnnotation = "scheduling.lockstep.dev/required-topology"
	// DeviceTopologyAnnotation on a PodGroup (or a workload) names a device
	// attribute ("gpu.example.com/clique"): every member's devices that
	// carry it must share one value of it (an NVLink clique, an IMEX
	// domain), wherever the nodes are.
	DeviceTopologyAnnotation = "scheduling.lockstep.dev/device-topology"
	// GangOfAnnotation on a pod (written into a job's pod templates by the
	// webhook) says its group is the gang Lockstep makes for its job:
	// "<Kind>.<group>/<name>", e.g. "Job.batch/train". The pod is a member
	// only of a PodGroup that job controls, never of another one of that
	// name (a user's created before the job, another kind's).
	GangOfAnnotation = "scheduling.lockstep.dev/gang-of"
	// CapacityTypesAnnotation on a PodGroup (or a workload, which passes it
	// to its groups) lists the capacity types its members may run on,
	// comma-separated, of on-demand, reserved and spot (a node's type is
	// its karpenter.sh/capacity-type or eks.amazonaws.com/capacityType
	// label; a node with neither is on-demand). Without it, the scheduler's
	// default (--default-capacity-types: on-demand,reserved) applies: a
	// gang restarts whole at each Spot interruption, so gangs stay off Spot
	// unless they ask for it.
	CapacityTypesAnnotation = "scheduling.lockstep.dev/capacity-types"
	// ReservedForTaint (NoSchedule) is on the nodes Lockstep asked an
	// autoscaler for on a forming gang's behalf, its value the gang's
	// unit hash: no other pod takes them before the gang binds; the
	// scheduler removes it once the gang is bound or gone.
	ReservedForTaint = "scheduling.lockstep.dev/reserved-for"
	// MinRuntimeAnnotation on a PodGroup (or the CompositePodGroup a tree
	// is evicted with) is a Go duration ("30m"): the group is no
	// preemption victim before it has run that long since its newest
	// member started (so two gangs cannot evict each other in a loop). It
	// wins over the scheduler's default for its PriorityClass
	// (--min-runtime).
	MinRuntimeAnnotation = "scheduling.lockstep.dev/min-runtime"
	// PreemptionNoticeAnnotation on a PodGroup (or the CompositePodGroup a
	// tree is evicted with, or a workload, which passes it to its groups)
	// is a Go duration ("10m"): chosen as a preemption victim, the group is
	// first given that much notice to checkpoint (PreemptionPending) and
	// evicted whole when it acknowledges (CheckpointedAtAnnotation) or the
	// notice ends. It wins over the scheduler's default for its
	// PriorityClass (--preemption-notice).
	PreemptionNoticeAnnotation = "scheduling.lockstep.dev/preemption-notice"
	// CheckpointedAtAnnotation on a PodGroup or any of its members is an
	// RFC 3339 time: when the group last saved its work. The victim search
	// counts the work a preemption loses from it, and a group under notice
	// that sets it later than the notice is evicted at once.
	CheckpointedAtAnnotation = "scheduling.lockstep.dev/checkpointed-at"
	// PreemptionPendingAnnotation is on every member of a group under
	// preemption notice, its value the RFC 3339 deadline by which the group
	// is evicted: a container reads it live through a downward-API volume
	// (metadata.annotations['scheduling.lockstep.dev/preemption-pending']).
	PreemptionPendingAnnotation = "scheduling.lockstep.dev/preemption-pending"
	// MaxRuntimeAnnotation on a PodGroup (or the CompositePodGroup of a
	// tree, or a workload; a Job's spec.activeDeadlineSeconds gives it) is
	// a Go duration: the group ends by then after its newest member
	// started. A preemptor that would wait only a little for it to end
	// waits instead of evicting others (--preemption-short-wait).
	MaxRuntimeAnnotation = "scheduling.lockstep.dev/max-runtime"
	// PreemptionDelayAnnotation on a PodGroup (or the CompositePodGroup of
	// a tree, or a workload) is a Go duration: the group preempts nothing
	// before it has waited that long since its newest pending member was
	// created (time for capacity to free or arrive on its own). It wins
	// over the scheduler's default for its PriorityClass
	// (--preemption-delay).
	PreemptionDelayAnnotation = "scheduling.lockstep.dev/preemption-delay"
)

// Condition types and reasons, as in scheduling.k8s.io/v1beta1.
const (
	PodGroupInitiallyScheduled = "PodGroupInitiallyScheduled"
	DisruptionTarget           = "DisruptionTarget"
	// PreemptionPending is True on a group (and on each member pod) chosen
	// as a preemption victim and given notice: its message names the
	// preemptor and the deadline.
	PreemptionPending = "PreemptionPending"
	// Reasons of PreemptionPending.
	PreemptionPendingReasonNotice    = "NoticeGiven" // True: checkpoint before the deadline
	PreemptionPendingReasonEvicted   = "Evicted"     // False: acknowledged or the notice ended
	PreemptionPendingReasonWithdrawn = "Withdrawn"   // False: the preemptor no longer needs it

	PodGroupReasonScheduled      = "Scheduled"
	PodGroupReasonUnschedulable  = "Unschedulable"
	PodGroupReasonSchedulerError = "SchedulerError"
	// PodGroupReasonWaitingForPods: fewer than minCount members exist yet.
	PodGroupReasonWaitingForPods = "WaitingForPods"
	// PodGroupReasonSchedulingGated: members still have scheduling gates,
	// and without them the group is below minCount.
	PodGroupReasonSchedulingGated = "SchedulingGated"
	PodGroupReasonPreemption      = "PreemptionByScheduler"
	// PodGroupReasonNodeInterrupted ends an incarnation whose node got an
	// interruption signal with notice (a Spot interruption, Karpenter's
	// disruption taint): the gang was told, and restarts whole elsewhere.
	PodGroupReasonNodeInterrupted = "NodeInterrupted"

	// Running is the group's state now, reset with each incarnation (not in
	// scheduling.k8s.io/v1beta1): True while the current incarnation runs.
	Running = "Running"
	// Reasons of Running.
	RunningReasonRunning    = "Running"    // True: the incarnation's members run
	RunningReasonPending    = "Pending"    // not admitted yet
	RunningReasonRestarting = "Restarting" // lost a member; restarts whole when its pods are recreated
	RunningReasonPreempted  = "Preempted"  // preempted whole; scheduled again when room is free
	RunningReasonCompleted  = "Completed"  // every member succeeded
	RunningReasonFailed     = "Failed"     // its owner failed, or it lost members nothing recreates
	RunningReasonSuspended  = "Suspended"  // its owner is suspended (e.g. by a queue)

	// PodCreationBlocked (not in scheduling.k8s.io/v1beta1) is True while a
	// gang waits for pods that its job's controller cannot create, and
	// absent otherwise.
	PodCreationBlocked = "PodCreationBlocked"
	// PodCreationReasonQuotaExceeded: a ResourceQuota of the namespace has
	// no room for them; the message names it, the resource and the fix.
	PodCreationReasonQuotaExceeded = "QuotaExceeded"
)

// Labels of other components that Lockstep reads on pods.
const (
	// JobCompletionIndexLabel is the Job controller's index label on Indexed Job pods.
	JobCompletionIndexLabel = "batch.kubernetes.io/job-completion-index"
)
