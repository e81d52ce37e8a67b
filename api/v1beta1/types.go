package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +genclient:noStatus
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=lockstep
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Workload is the shape of a group-scheduled job, declared once: its pod group
// templates and their scheduling policies. PodGroups are its runtime instances.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec WorkloadSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// WorkloadList is a list of Workloads.
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}

// WorkloadSpec defines a Workload.
// +kubebuilder:validation:XValidation:rule="has(self.controllerRef) == has(oldSelf.controllerRef)",message="controllerRef is immutable: it cannot be added or removed",fieldPath=".controllerRef"
// +kubebuilder:validation:XValidation:rule="has(self.podGroupTemplates) != has(self.compositePodGroupTemplates)",message="exactly one of podGroupTemplates and compositePodGroupTemplates must be set"
type WorkloadSpec struct {
	// controllerRef points to the object (e.g. a Job) that manages this Workload.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="controllerRef is immutable"
	ControllerRef *TypedLocalObjectReference `json:"controllerRef,omitempty"`

	// podGroupTemplates are the groups of pods this workload consists of
	// (a flat workload).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="podGroupTemplates are immutable"
	PodGroupTemplates []PodGroupTemplate `json:"podGroupTemplates,omitempty"`
	// compositePodGroupTemplates are the roots of this workload's
	// scheduling trees, each with its children (a tree-shaped workload).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="compositePodGroupTemplates are immutable"
	CompositePodGroupTemplates []CompositePodGroupTemplate `json:"compositePodGroupTemplates,omitempty"`
}

// TypedLocalObjectReference refers to an object in the same namespace.
type TypedLocalObjectReference struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PodGroupTemplate is one group of a Workload.
type PodGroupTemplate struct {
	// name identifies the template within the Workload.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// schedulingPolicy is basic (pod by pod) or gang (all or nothing).
	SchedulingPolicy PodGroupSchedulingPolicy `json:"schedulingPolicy"`
	// schedulingConstraints restrict where the group's pods may go together.
	// +optional
	SchedulingConstraints *PodGroupSchedulingConstraints `json:"schedulingConstraints,omitempty"`
	// resourceClaims are claims shared by the whole group.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	ResourceClaims []PodGroupResourceClaim `json:"resourceClaims,omitempty"`
	// disruptionMode says whether the group is disrupted pod by pod or whole.
	// +optional
	DisruptionMode *DisruptionMode `json:"disruptionMode,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// +optional
	PreemptionPolicy *PreemptionPolicy `json:"preemptionPolicy,omitempty"`
}

// PodGroupSchedulingPolicy holds exactly one policy.
// +kubebuilder:validation:XValidation:rule="has(self.basic) != has(self.gang)",message="exactly one of basic or gang must be set"
type PodGroupSchedulingPolicy struct {
	// basic places the pods independently, as kube-scheduler does.
	// +optional
	Basic *BasicSchedulingPolicy `json:"basic,omitempty"`
	// gang places at least minCount pods together, or none.
	// +optional
	Gang *GangSchedulingPolicy `json:"gang,omitempty"`
}

// BasicSchedulingPolicy is pod-by-pod scheduling.
type BasicSchedulingPolicy struct{}

// GangSchedulingPolicy is all-or-nothing scheduling.
type GangSchedulingPolicy struct {
	// minCount is how many pods must be placeable together for any to be bound.
	// It is mutable to support scaling; a new value applies from the next cycle.
	// +kubebuilder:validation:Minimum=1
	MinCount int32 `json:"minCount"`
}

// PodGroupResourceClaim names one ResourceClaim shared by the group, directly
// or through a ResourceClaimTemplate instantiated once for the group.
// +kubebuilder:validation:XValidation:rule="has(self.resourceClaimName) != has(self.resourceClaimTemplateName)",message="exactly one of resourceClaimName or resourceClaimTemplateName must be set"
type PodGroupResourceClaim struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// +optional
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
	// +optional
	ResourceClaimTemplateName *string `json:"resourceClaimTemplateName,omitempty"`
}

// DisruptionMode holds exactly one mode.
// +kubebuilder:validation:XValidation:rule="has(self.single) != has(self.all)",message="exactly one of single or all must be set"
type DisruptionMode struct {
	// single: members may be disrupted one by one.
	// +optional
	Single *SingleDisruptionMode `json:"single,omitempty"`
	// all: a group that loses a member is taken down and re-queued whole.
	// +optional
	All *AllDisruptionMode `json:"all,omitempty"`
}

// SingleDisruptionMode disrupts pods individually.
type SingleDisruptionMode struct{}

// AllDisruptionMode disrupts the whole group.
type AllDisruptionMode struct{}

// PreemptionPolicy says whether a group may preempt lower-priority work.
// +kubebuilder:validation:Enum=PreemptLowerPriority;Never
type PreemptionPolicy string

const (
	PreemptLowerPriority PreemptionPolicy = "PreemptLowerPriority"
	PreemptNever         PreemptionPolicy = "Never"
)

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=pg,categories=lockstep
// +kubebuilder:printcolumn:name="MinCount",type=integer,JSONPath=`.spec.schedulingPolicy.gang.minCount`
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].reason`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[?(@.type=="Running")].reason`
// +kubebuilder:printcolumn:name="Incarnation",type=integer,JSONPath=`.status.incarnation.number`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PodGroup is a runtime group of pods admitted or rejected as a unit. Pods
// join it with the label scheduling.lockstep.dev/pod-group: <name>.
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PodGroupSpec `json:"spec"`
	// +optional
	Status PodGroupStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PodGroupList is a list of PodGroups.
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}

// PodGroupSpec defines a PodGroup. Everything but gang.minCount is
// immutable: a field can neither change nor be added or removed (the field's own rule sees only changes, as CEL transition
// rules run only where the field exists on both sides; these see the rest).
// +kubebuilder:validation:XValidation:rule="has(self.schedulingPolicy.gang) == has(oldSelf.schedulingPolicy.gang)",message="schedulingPolicy cannot change between basic and gang"
// +kubebuilder:validation:XValidation:rule="has(self.workloadRef) == has(oldSelf.workloadRef)",message="workloadRef is immutable: it cannot be added or removed",fieldPath=".workloadRef"
// +kubebuilder:validation:XValidation:rule="has(self.schedulingConstraints) == has(oldSelf.schedulingConstraints)",message="schedulingConstraints are immutable: they cannot be added or removed",fieldPath=".schedulingConstraints"
// +kubebuilder:validation:XValidation:rule="has(self.resourceClaims) == has(oldSelf.resourceClaims)",message="resourceClaims are immutable: they cannot be added or removed",fieldPath=".resourceClaims"
// +kubebuilder:validation:XValidation:rule="has(self.disruptionMode) == has(oldSelf.disruptionMode)",message="disruptionMode is immutable: it cannot be added or removed",fieldPath=".disruptionMode"
// +kubebuilder:validation:XValidation:rule="has(self.priorityClassName) == has(oldSelf.priorityClassName)",message="priorityClassName is immutable: it cannot be added or removed",fieldPath=".priorityClassName"
// +kubebuilder:validation:XValidation:rule="has(self.priority) == has(oldSelf.priority)",message="priority is immutable: it cannot be added or removed",fieldPath=".priority"
// +kubebuilder:validation:XValidation:rule="has(self.preemptionPolicy) == has(oldSelf.preemptionPolicy)",message="preemptionPolicy is immutable: it cannot be added or removed; delete the PodGroup and create it with the policy you want",fieldPath=".preemptionPolicy"
// +kubebuilder:validation:XValidation:rule="has(self.parentCompositePodGroupName) == has(oldSelf.parentCompositePodGroupName)",message="parentCompositePodGroupName is immutable: it cannot be added or removed",fieldPath=".parentCompositePodGroupName"
type PodGroupSpec struct {
	// parentCompositePodGroupName names the CompositePodGroup (same
	// namespace) whose tree this group belongs to: the group is then
	// scheduled with its tree, never on its own.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="parentCompositePodGroupName is immutable"
	ParentCompositePodGroupName *string `json:"parentCompositePodGroupName,omitempty"`
	// workloadRef points to the Workload template this group instantiates.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workloadRef is immutable"
	WorkloadRef      *WorkloadReference       `json:"workloadRef,omitempty"`
	SchedulingPolicy PodGroupSchedulingPolicy `json:"schedulingPolicy"`
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="schedulingConstraints are immutable"
	SchedulingConstraints *PodGroupSchedulingConstraints `json:"schedulingConstraints,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="resourceClaims are immutable"
	ResourceClaims []PodGroupResourceClaim `json:"resourceClaims,omitempty"`
	// disruptionMode defaults to all in Lockstep (upstream defaults to single):
	// a gang that loses a member is taken down and re-queued whole, so it never
	// sits partially alive holding accelerators.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="disruptionMode is immutable"
	DisruptionMode *DisruptionMode `json:"disruptionMode,omitempty"`
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="priorityClassName is immutable"
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="priority is immutable"
	Priority *int32 `json:"priority,omitempty"`
	// preemptionPolicy can only make the group stricter than its members:
	// Never forbids preemption for the group; PreemptLowerPriority (or
	// unset) leaves it to the members' own policy, and a member whose
	// PriorityClass says Never keeps the group from preempting.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="preemptionPolicy is immutable; delete the PodGroup and create it with the policy you want"
	PreemptionPolicy *PreemptionPolicy `json:"preemptionPolicy,omitempty"`
}

// WorkloadReference names a Workload and one of its templates.
type WorkloadReference struct {
	// +kubebuilder:validation:MinLength=1
	WorkloadName string `json:"workloadName"`
	// +kubebuilder:validation:MinLength=1
	TemplateName string `json:"templateName"`
}

// PodGroupSchedulingConstraints restrict where a group may go.
type PodGroupSchedulingConstraints struct {
	// topology: the whole group must fit inside one domain of each key.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	Topology []TopologyConstraint `json:"topology,omitempty"`
}

// TopologyConstraint keeps a group inside one value of a node label.
type TopologyConstraint struct {
	// key is a node label, e.g. topology.kubernetes.io/zone.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
}

// PodGroupStatus is observed state.
type PodGroupStatus struct {
	// conditions: PodGroupInitiallyScheduled (reasons Scheduled, Unschedulable,
	// SchedulerError, WaitingForPods, SchedulingGated; True once the group was first admitted,
	// and then for ever, as upstream), Running (the state now: reasons
	// Running, Pending, Restarting, Preempted, Completed, Failed, Suspended;
	// reset with each incarnation), DisruptionTarget
	// (PreemptionByScheduler, or the reason of the last gang restart) and,
	// while the gang waits for pods its job's controller cannot create,
	// PodCreationBlocked (reason QuotaExceeded).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// incarnation is the group's current admission: the members the
	// scheduler bound for it and, once it is over, why it ended. A gang that
	// restarts whole starts a new incarnation when it is bound again. (Not in
	// scheduling.k8s.io/v1beta1.)
	// +optional
	Incarnation *PodGroupIncarnation `json:"incarnation,omitempty"`
	// resourceClaimStatuses names the claims generated for the group's templates.
	// +optional
	// +listType=map
	// +listMapKey=name
	ResourceClaimStatuses []PodGroupResourceClaimStatus `json:"resourceClaimStatuses,omitempty"`
}

// PodGroupResourceClaimStatus maps a group claim to its ResourceClaim.
type PodGroupResourceClaimStatus struct {
	Name string `json:"name"`
	// +optional
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
}

// PodGroupIncarnation is one admission of a group: written by the scheduler
// when it has bound the members it admitted (and again when it binds members
// added later by a resize), ended by the scheduler (preemption) or by the
// gang integrity controller (a lost member, completion, the owner stopping).
// Only the current incarnation's members are ever judged lost, so members of
// an earlier one that linger (Failed, or being deleted) never count against
// the next.
type PodGroupIncarnation struct {
	// number counts the group's admissions: 1 for the first, one more for
	// each later one.
	// +kubebuilder:validation:Minimum=1
	Number int32 `json:"number"`
	// minCount is the group's minCount when members were last bound into
	// this incarnation (its admission, or a resize step).
	// +kubebuilder:validation:Minimum=1
	MinCount int32 `json:"minCount"`
	// boundTime is when the scheduler finished binding the members it admitted.
	BoundTime metav1.Time `json:"boundTime"`
	// lastBoundTime is when the scheduler last finished binding members into
	// this incarnation (the admission, or a later resize step).
	LastBoundTime metav1.Time `json:"lastBoundTime"`
	// members are the pods bound in this incarnation (about 100 bytes each
	// in the object).
	// +listType=map
	// +listMapKey=uid
	Members []PodGroupMember `json:"members"`
	// ended is set once the incarnation is over, with why.
	// +optional
	Ended *PodGroupIncarnationEnd `json:"ended,omitempty"`
}

// Lists reports whether the pod with this UID is a member of the incarnation.
func (in *PodGroupIncarnation) Lists(uid types.UID) bool {
	for i := range in.Members {
		if in.Members[i].UID == uid {
			return true
		}
	}
	return false
}

// PodGroupMember is one pod of an incarnation.
type PodGroupMember struct {
	// +kubebuilder:validation:MinLength=1
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
	// index is the member's completion index in its Job
	// (batch.kubernetes.io/job-completion-index), when its pod has one: a
	// scale-down is told from a loss by it after the pod is gone.
	// +optional
	Index *int32 `json:"index,omitempty"`
	// outcome is how the member left the incarnation without it being a loss:
	// Succeeded (it finished) or Removed (its owner scaled it away). Unset
	// while it runs.
	// +optional
	Outcome MemberOutcome `json:"outcome,omitempty"`
}

// MemberOutcome is how a member left its incarnation without loss.
// +kubebuilder:validation:Enum=Succeeded;Removed
type MemberOutcome string

const (
	// MemberSucceeded: the member's pod finished with phase Succeeded.
	MemberSucceeded MemberOutcome = "Succeeded"
	// MemberRemoved: the member's owner no longer wants it (a scale-down).
	MemberRemoved MemberOutcome = "Removed"
)

// PodGroupIncarnationEnd says why an incarnation is over.
type PodGroupIncarnationEnd struct {
	// reason is CamelCase: MemberFailed, MemberLost, NodeLost, DeviceFailed
	// (a restart), PreemptionByScheduler, Completed or OwnerStopped.
	// +kubebuilder:validation:MinLength=1
	Reason string `json:"reason"`
	// +optional
	Message string      `json:"message,omitempty"`
	Time    metav1.Time `json:"time"`
}
