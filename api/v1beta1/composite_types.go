package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=cpg,categories=lockstep
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentCompositePodGroupName`
// +kubebuilder:printcolumn:name="MinGroupCount",type=integer,JSONPath=`.spec.schedulingPolicy.gang.minGroupCount`
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="CompositePodGroupInitiallyScheduled")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="CompositePodGroupInitiallyScheduled")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// CompositePodGroup groups PodGroups (and other CompositePodGroups) into a
// scheduling tree: the job in one zone and each worker group within a rack,
// a Ray head and its worker groups, the prefill and decode groups of a
// serving stack. The root of a tree is what the scheduler places, all or
// nothing: a child counts when its own minCount (or minGroupCount) is met,
// and the tree is admitted only when every level's minGroupCount is. Same
// fields and JSON names as scheduling.k8s.io/v1alpha3 CompositePodGroup
// (KEP-6012), but workloadRef is optional, as for Lockstep's PodGroups.
type CompositePodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec CompositePodGroupSpec `json:"spec"`
	// +optional
	Status CompositePodGroupStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// CompositePodGroupList is a list of CompositePodGroups.
type CompositePodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompositePodGroup `json:"items"`
}

// CompositePodGroupSpec defines a CompositePodGroup. Every field is
// immutable: it can neither change nor be added or removed.
// +kubebuilder:validation:XValidation:rule="has(self.parentCompositePodGroupName) == has(oldSelf.parentCompositePodGroupName)",message="parentCompositePodGroupName is immutable: it cannot be added or removed",fieldPath=".parentCompositePodGroupName"
// +kubebuilder:validation:XValidation:rule="has(self.workloadRef) == has(oldSelf.workloadRef)",message="workloadRef is immutable: it cannot be added or removed",fieldPath=".workloadRef"
// +kubebuilder:validation:XValidation:rule="has(self.schedulingConstraints) == has(oldSelf.schedulingConstraints)",message="schedulingConstraints are immutable: they cannot be added or removed",fieldPath=".schedulingConstraints"
// +kubebuilder:validation:XValidation:rule="has(self.disruptionMode) == has(oldSelf.disruptionMode)",message="disruptionMode is immutable: it cannot be added or removed",fieldPath=".disruptionMode"
// +kubebuilder:validation:XValidation:rule="has(self.priorityClassName) == has(oldSelf.priorityClassName)",message="priorityClassName is immutable: it cannot be added or removed",fieldPath=".priorityClassName"
// +kubebuilder:validation:XValidation:rule="has(self.priority) == has(oldSelf.priority)",message="priority is immutable: it cannot be added or removed",fieldPath=".priority"
// +kubebuilder:validation:XValidation:rule="has(self.preemptionPolicy) == has(oldSelf.preemptionPolicy)",message="preemptionPolicy is immutable: it cannot be added or removed",fieldPath=".preemptionPolicy"
type CompositePodGroupSpec struct {
	// parentCompositePodGroupName names the parent CompositePodGroup in the
	// same namespace; unset for the root of a tree.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="parentCompositePodGroupName is immutable"
	ParentCompositePodGroupName *string `json:"parentCompositePodGroupName,omitempty"`
	// workloadRef points to the Workload template this group instantiates
	// (optional: a tree may be written by hand).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workloadRef is immutable"
	WorkloadRef *WorkloadReference `json:"workloadRef,omitempty"`
	// schedulingPolicy: gang (minGroupCount children admitted together, all
	// or nothing) or basic (children scheduled independently).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="schedulingPolicy is immutable"
	SchedulingPolicy CompositePodGroupSchedulingPolicy `json:"schedulingPolicy"`
	// schedulingConstraints: topology for the whole subtree; each child is
	// placed inside its parent's domain.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="schedulingConstraints are immutable"
	SchedulingConstraints *PodGroupSchedulingConstraints `json:"schedulingConstraints,omitempty"`
	// disruptionMode: all (Lockstep's default) restarts every group under
	// this one when any member is lost; single restarts only the child
	// group that lost it. (Upstream defaults to single.)
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="disruptionMode is immutable"
	DisruptionMode *DisruptionMode `json:"disruptionMode,omitempty"`
	// priorityClassName and priority must agree with the members' (a
	// tree's priority is its members', as for PodGroups).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="priorityClassName is immutable"
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="priority is immutable"
	Priority *int32 `json:"priority,omitempty"`
	// preemptionPolicy can only make preemption stricter than the
	// members' own policy.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="preemptionPolicy is immutable"
	PreemptionPolicy *PreemptionPolicy `json:"preemptionPolicy,omitempty"`
}

// CompositePodGroupSchedulingPolicy is exactly one of basic or gang.
// +kubebuilder:validation:XValidation:rule="has(self.basic) != has(self.gang)",message="exactly one of basic or gang must be set"
type CompositePodGroupSchedulingPolicy struct {
	// basic: the children are scheduled independently.
	// +optional
	Basic *CompositeBasicSchedulingPolicy `json:"basic,omitempty"`
	// gang: at least minGroupCount children are admitted together.
	// +optional
	Gang *CompositeGangSchedulingPolicy `json:"gang,omitempty"`
}

// CompositeBasicSchedulingPolicy schedules the children independently.
type CompositeBasicSchedulingPolicy struct{}

// CompositeGangSchedulingPolicy admits the children all or nothing.
type CompositeGangSchedulingPolicy struct {
	// minGroupCount is how many children must be admitted at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	MinGroupCount int32 `json:"minGroupCount"`
}

// CompositePodGroupStatus is observed state.
type CompositePodGroupStatus struct {
	// conditions: CompositePodGroupInitiallyScheduled (True once the tree
	// under this group was first admitted, and then for ever; reasons
	// Scheduled, Unschedulable, SchedulerError, WaitingForPods,
	// WaitingForParent, Invalid), DisruptionTarget.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CompositePodGroupTemplate is one CompositePodGroup of a Workload, with
// its children: exactly one of podGroupTemplates and
// compositePodGroupTemplates (checked where the Workload's groups are
// made: a CRD schema cannot describe the nested list).
type CompositePodGroupTemplate struct {
	// name is unique among the Workload's templates.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name             string                            `json:"name"`
	SchedulingPolicy CompositePodGroupSchedulingPolicy `json:"schedulingPolicy"`
	// +optional
	SchedulingConstraints *PodGroupSchedulingConstraints `json:"schedulingConstraints,omitempty"`
	// +optional
	DisruptionMode *DisruptionMode `json:"disruptionMode,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// +optional
	PreemptionPolicy *PreemptionPolicy `json:"preemptionPolicy,omitempty"`
	// podGroupTemplates are the leaf groups under this one.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	PodGroupTemplates []PodGroupTemplate `json:"podGroupTemplates,omitempty"`
	// compositePodGroupTemplates are the composite groups under this one
	// (a CRD schema cannot recurse: below the first level, they are
	// checked when their groups are created, as a tree of objects).
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	CompositePodGroupTemplates []CompositePodGroupTemplate `json:"compositePodGroupTemplates,omitempty"`
}

// Condition types and reasons of CompositePodGroups.
const (
	CompositePodGroupInitiallyScheduled = "CompositePodGroupInitiallyScheduled"
	// CompositeReasonWaitingForParent: the parent named by
	// parentCompositePodGroupName does not exist (yet, or any more).
	CompositeReasonWaitingForParent = "WaitingForParent"
	// CompositeReasonInvalid: the tree is not a valid layout (a cycle,
	// deeper than 4 levels, more than 8 children, two Workloads).
	CompositeReasonInvalid = "Invalid"
)

// MaxTreeDepth and MaxChildren bound a scheduling tree, as upstream's.
const (
	MaxTreeDepth = 4
	MaxChildren  = 8
)
