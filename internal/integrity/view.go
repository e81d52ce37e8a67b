package integrity

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// View is everything one verdict depends on, read once from the
// controller's caches and handed to Decide: no API read happens inside a
// decision, so the same view always gives the same verdict (a controller
// restart changes nothing), and verdicts are table-tested on event sequences.
type View struct {
	Group *lockv1.PodGroup
	// Pods are the group's pods (any scheduler; Decide keeps Lockstep's).
	Pods []*corev1.Pod
	// Departed are the last states of the group's pods deleted recently, by
	// UID, as their delete events carried them: a member that finished and
	// was deleted before a verdict saw it finish is still known to have
	// succeeded.
	Departed map[types.UID]*corev1.Pod
	// Node returns a node, or false when it does not exist.
	Node func(name string) (*corev1.Node, bool)
	// Claim returns a claim, or nil.
	Claim func(namespace, name string) *resourcev1.ResourceClaim
	// Taints returns a device's taints, DeviceTaintRules applied.
	Taints func(structured.DeviceID) []resourcev1.DeviceTaint
	// Owner is the workload that owns the group and recreates its pods
	// (a Job); nil for a group of bare pods, which nothing recreates.
	Owner *Owner
	// NamespaceTerminating: everything in it is going away; nothing restarts.
	NamespaceTerminating bool
	Now                  time.Time
	// NodeGrace is how long a member's node may be NotReady before it is lost.
	NodeGrace time.Duration
}

// Owner is what the integrity controller needs to know of a group's owner.
type Owner struct {
	// Name is how messages name it, e.g. "Job ml/train".
	Name string
	// Stopped says why the owner no longer wants its pods running
	// ("suspended", "complete", "failed: BackoffLimitExceeded"); "" while it does.
	Stopped string
	// Failed: the owner finished unsuccessfully.
	Failed bool
	// Suspended: the owner is suspended (e.g. held by a queue) and will resume.
	Suspended bool
	// Wants reports whether a member with this index is still part of the
	// owner; false once a scale-down removed the index.
	Wants func(index int32) bool
	// Size is how many pods the owner now wants in this group (0: not
	// known). A member deleted while no fewer than Size remain was scaled
	// away (a Ray cluster's or an elastic job's workers, which have no
	// index), not lost.
	Size int
}
