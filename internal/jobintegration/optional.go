package jobintegration

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// What only some kinds have is asked through optional interfaces, checked
// with a type assertion: of a GenericJob MinCounter, RoleMinCounter, FieldValidator, Warner,
// PodGrouper, InTreeGanger, IndexedJob, DefaultScoper and
// DisruptionDefaulter; of an Integration PodAdmissionMatcher and Wrapped.

// InTreeGanger is a GenericJob of a kind that can carry its own gang policy
// for the API server's scheduling.k8s.io PodGroup (upstream
// WorkloadWithJob's batch/v1 Job).
type InTreeGanger interface {
	// InTreeGang reports whether the job carries such a policy; then
	// Lockstep creates no second group.
	InTreeGang() bool
}

// InTreeGang reports whether j carries its own in-tree gang policy
// (InTreeGanger); no other kind can.
func InTreeGang(j GenericJob) bool {
	g, ok := j.(InTreeGanger)
	return ok && g.InTreeGang()
}

// IndexedJob is a GenericJob whose members have completion indexes and
// whose scale-down removes indexes (an elastic Indexed Job); other kinds
// scale by count and remove no member by index.
type IndexedJob interface {
	// Wants reports whether the member with this index is still part of
	// the job: false once a scale-down removed the index.
	Wants(index int32) bool
}

// WantsIndex is j's IndexedJob.Wants, nil when j's kind removes no member
// by index.
func WantsIndex(j GenericJob) func(index int32) bool {
	if ij, ok := j.(IndexedJob); ok {
		return ij.Wants
	}
	return nil
}

// DefaultScoper is a GenericJob whose kind chooses its gang scope when the
// annotation does not (a JobSet whose replicated jobs start in order).
type DefaultScoper interface {
	DefaultScope() string
}

// DisruptionDefaulter is a GenericJob whose kind chooses its disruption
// mode when the annotation does not (a serving Kueue pod group, whose
// controller replaces a lost replica by itself: "single").
type DisruptionDefaulter interface {
	DefaultDisruptionMode() string
}

// PodAdmissionMatcher is an Integration whose controller creates the pods
// itself (not through a Job), so the pod webhook must see them to put them
// in their group: a CEL expression true for such a pod.
type PodAdmissionMatcher interface {
	PodAdmissionMatch() string
}

// MinCounter is a GenericJob whose kind states its own minimum (a training
// job's schedulingPolicy.minAvailable, an elastic job's minReplicas, a Ray
// cluster's worker groups' minReplicas): the gang's minCount unless the
// annotation overrides it.
type MinCounter interface {
	// KindMinCount is the kind's minimum, ok false when the job states none.
	KindMinCount() (n int32, ok bool)
}

// RoleMinCounter is a GenericJob whose roles keep minimums of their own (a
// Ray head and its worker groups, an elastic job's master and workers):
// its gang is a tree — a root CompositePodGroup that needs every child,
// one PodGroup per role with the role's minimum — so a coordinator is
// never left out while workers bind. A role with minimum 0 is a basic
// group that counts with none of its pods placed.
type RoleMinCounter interface {
	// RoleMinCounts is each role's minimum, ok false when the job is one
	// flat gang (every role needs all its pods together).
	RoleMinCounts() (mins map[string]int32, ok bool)
}

// FieldValidator is a GenericJob with checks of its kind's own fields,
// refused at admission (the webhook adds them to its own).
type FieldValidator interface {
	ValidateFields() field.ErrorList
}

// Warner is a GenericJob that warns at admission about what it sets that
// Lockstep does not use (a Volcano queue name), so nothing is silently
// ignored.
type Warner interface {
	Warnings() []string
}

// RestartBudgeter is a GenericJob with a failure budget of its own that a
// gang restart or preemption — which deletes running members, marked
// DisruptionTarget — would consume (a Job's backoffLimit).
type RestartBudgeter interface {
	// DefaultRestartBudget changes the job, at its creation, so that a gang
	// restart costs it nothing where its kind allows that, and returns the
	// fields it set (nil when none).
	DefaultRestartBudget() []string
	// RestartBudgetWarnings say where a gang restart would still cost it,
	// and the fix.
	RestartBudgetWarnings() []string
}

// RestartsWhole reports whether Lockstep restarts and preempts the pods of
// a job of class c as (part of) a gang: its own, its parent's, or the
// group its template names.
func RestartsWhole(c Class) bool {
	return c == ClassGang || c == ClassChild || c == ClassNamed
}

// PodGrouper is a GenericJob whose groups are not one per role but told
// apart per pod (a LeaderWorkerSet's replicas share their templates): it
// lists them, and says which one a pod joins. Its templates are never
// labelled; the pod webhook labels each pod.
type PodGrouper interface {
	Groups() []Group
	GroupOfPod(pod *corev1.Pod) string
}
