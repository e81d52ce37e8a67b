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
//
// Caches are not synced with each other: after an API server restart one
// informer may catch up seconds after another, so the PodGroup cache can
// record members the pod cache has not seen yet, and the node cache can miss
// a node or show a condition that has since changed. Decide never concludes
// a loss from what a cache does not show: it names what it would rest on
// (Verdict.Confirm), the reconciler reads exactly that from the API server,
// and Decide judges again with those reads (Read), which win over the caches.
type View struct {
	Group *lockv1.PodGroup
	// Pods are the group's pods (any scheduler; Decide keeps Lockstep's).
	Pods []*corev1.Pod
	// Departed are the last states of the group's pods deleted recently, by
	// UID, as their delete events carried them: a member that finished and
	// was deleted before a verdict saw it finish is still known to have
	// succeeded.
	Departed map[types.UID]*corev1.Pod
	// Node returns a node from the cache, or false when the cache does not
	// hold it.
	Node func(name string) (*corev1.Node, bool)
	// Claim returns a claim, or nil.
	Claim func(namespace, name string) *resourcev1.ResourceClaim
	// Taints returns a device's taints, DeviceTaintRules applied.
	Taints func(structured.DeviceID) []resourcev1.DeviceTaint
	// Owner is the workload that owns the group and recreates its pods
	// (a Job); nil for a group of bare pods, which nothing recreates.
	Owner *Owner
	// TreeShort, for a group of a scheduling tree, says which gang
	// CompositePodGroup between the group and its disruption scope no
	// longer has minGroupCount children (one was deleted after the tree was
	// admitted), as the API server confirmed it; "" when none is short.
	TreeShort string
	// NamespaceTerminating: everything in it is going away; nothing restarts.
	NamespaceTerminating bool
	Now                  time.Time
	// NodeGrace is how long a member's node may be NotReady before it is lost.
	NodeGrace time.Duration
	// Read are the objects a previous Decide on this view asked to confirm,
	// as the API server returned them; nil before any was read.
	Read *Reads
}

// Reads are objects read from the API server directly, for a verdict the
// caches alone are not trusted with. A read wins over the caches.
type Reads struct {
	// Pods by member UID: nil when the API server has no pod of the
	// member's name and UID (it was deleted).
	Pods map[types.UID]*corev1.Pod
	// Nodes by name: nil when the API server has no such node.
	Nodes map[string]*corev1.Node
}

// Confirm names what a verdict would rest on that the caches may show
// wrongly: members the pod cache does not hold (deleted, or not seen yet?),
// nodes the node cache does not hold or shows NotReady past the grace
// period (gone or NotReady, or a cache behind?).
type Confirm struct {
	Pods  []lockv1.PodGroupMember
	Nodes []string
}

func (c *Confirm) empty() bool { return c == nil || len(c.Pods) == 0 && len(c.Nodes) == 0 }

// pod is a member's pod as read, ok false when it was not read.
func (r *Reads) pod(uid types.UID) (p *corev1.Pod, ok bool) {
	if r == nil {
		return nil, false
	}
	p, ok = r.Pods[uid]
	return p, ok
}

// node finds a node: as read when it was (exists false: the API server has
// none), else from the cache; read says which.
func (v View) node(name string) (n *corev1.Node, exists, read bool) {
	if v.Read != nil {
		if n, ok := v.Read.Nodes[name]; ok {
			return n, n != nil, true
		}
	}
	n, exists = v.Node(name)
	return n, exists, false
}

// memberPod finds a member's pod: as read from the API server (nil, known:
// it has none, so it was deleted), else in the pod cache, else its last
// state from its delete event (departed). known is false when none of them
// has it: deleted, or created after the pod cache last caught up.
func (v View) memberPod(uid types.UID, cached map[types.UID]*corev1.Pod) (p *corev1.Pod, departed, known bool) {
	if r, ok := v.Read.pod(uid); ok {
		if r != nil {
			return r, false, true
		}
		return v.Departed[uid], true, true
	}
	if p := cached[uid]; p != nil {
		return p, false, true
	}
	if d := v.Departed[uid]; d != nil {
		return d, true, true
	}
	return nil, false, false
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
	// Held says what a suspended owner waits for when a queue holds it
	// ("waiting for Kueue admission in ClusterQueue gpus (LocalQueue
	// ml/team)", jobintegration.KueueHeld); "" when none does.
	Held string
	// Wants reports whether a member with this index is still part of the
	// owner; false once a scale-down removed the index.
	Wants func(index int32) bool
	// Size is how many pods the owner now wants in this group (0: not
	// known). A member deleted while no fewer than Size remain was scaled
	// away (a Ray cluster's or an elastic job's workers, which have no
	// index), not lost.
	Size int
	// Children counts, per CompositePodGroup, the groups the owner now
	// wants under it: an owner that dropped a role (its group pruned)
	// shrank its tree on purpose, and the tree is not short of that group.
	Children map[string]int
}
