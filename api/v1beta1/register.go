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
)

// Condition types and reasons, as in scheduling.k8s.io/v1beta1.
const (
	PodGroupInitiallyScheduled = "PodGroupInitiallyScheduled"
	DisruptionTarget           = "DisruptionTarget"

	PodGroupReasonScheduled      = "Scheduled"
	PodGroupReasonUnschedulable  = "Unschedulable"
	PodGroupReasonSchedulerError = "SchedulerError"
	// PodGroupReasonWaitingForPods: fewer than minCount members exist yet.
	PodGroupReasonWaitingForPods = "WaitingForPods"
	PodGroupReasonPreemption     = "PreemptionByScheduler"
)
