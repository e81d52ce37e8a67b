package snapshot

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A Nomination is capacity held for a preemptor while the victims it
// evicted terminate: every cycle of a unit of lower or equal priority sees
// it taken, so what the preemption frees goes to the preemptor. Its life:
//
//	scheduler evicts victims ──► Nominate ──► held (in every snapshot of a
//	                                            │  unit of priority ≤ Priority,
//	                                            │  but the nominee's own)
//	    the nominee binds, replans, or Deadline ▼
//	                                   DropNomination
//
// A nomination made by this process knows the devices it was given
// (NominatedPod.Claims). One rebuilt from the pods' status.nominatedNodeName
// — after a restart, or in `lockstep explain` — knows only the nodes:
// Restored; its pods are placed on their nodes in each snapshot that holds
// it (internal/cycle), as kube-scheduler counts nominated pods on their
// nominated nodes.
type Nomination struct {
	// Priority is the nominee's: units of this priority or lower see it.
	Priority int32
	Pods     []NominatedPod
	// Victims are the pods evicted for it and the claims they held.
	Victims map[types.UID]Victim
	// Deadline: past it the nomination holds nothing (its victims did not
	// go in time; the nominee plans again).
	Deadline time.Time
	// Restored: rebuilt from status.nominatedNodeName (Pods have no Claims).
	Restored bool
	// Waiting, when set, is what the nominee waits for instead of evicted
	// victims (pods that declared they end soon): its condition's note.
	Waiting string
}

// NominatedPod is where one pod of the nominee goes.
type NominatedPod struct {
	Pod  *corev1.Pod
	Node string
	// Claims are what the pod's placement allocated this cycle (its new
	// allocations and its extended-resource claim): held as allocated.
	Claims []*resourcev1.ResourceClaim
}

// Victim is an evicted pod and the claims it held.
type Victim struct {
	Namespace, Name string
	Claims          []string
}

// VictimHolds reports whether claim c, which victim uid held, still holds
// its devices for it: allocated and reserved for it — or allocated and
// reserved for no one, between kube-controller-manager clearing the
// victim's reservation and deallocating (or deleting) the claim, when the
// devices are still taken.
func VictimHolds(c *resourcev1.ResourceClaim, uid types.UID) bool {
	if c == nil || c.Status.Allocation == nil {
		return false
	}
	if len(c.Status.ReservedFor) == 0 {
		return true
	}
	for _, r := range c.Status.ReservedFor {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// StillHeld reports whether the cache still counts something victim uid
// held: the pod, or a claim of its that VictimHolds. An informer's lister
// runs ahead of the cache (its handlers, which feed the cache, are called
// after the lister is updated), so a victim gone from the listers can
// still take capacity in the next snapshot: a preemptor that saw it gone
// there and did not fit would plan a second preemption elsewhere.
func (c *Cache) StillHeld(uid types.UID, v Victim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pi := c.pods[uid]; pi != nil && pi.pod != nil {
		return true
	}
	for _, name := range v.Claims {
		if ci := c.claims[types.NamespacedName{Namespace: v.Namespace, Name: name}]; ci != nil && VictimHolds(ci.effective(), uid) {
			return true
		}
	}
	return false
}

// Nominate holds capacity for the unit named key (replacing what it held).
func (c *Cache) Nominate(key string, n *Nomination) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nominations[key] = n
}

// Nomination is what key holds, or nil.
func (c *Cache) Nomination(key string) *Nomination {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nominations[key]
}

// DropNomination releases what key holds.
func (c *Cache) DropNomination(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.nominations, key)
}

// HeldNominations are the nominations a cycle for unit self of priority
// prio must see taken at now: every other unit's of priority ≥ prio whose
// deadline has not passed, by key.
func (c *Cache) HeldNominations(self string, prio int32, now time.Time) []*Nomination {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.nominations))
	for k, n := range c.nominations {
		if k != self && n.Priority >= prio && !now.After(n.Deadline) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]*Nomination, 0, len(keys))
	for _, k := range keys {
		out = append(out, c.nominations[k])
	}
	return out
}

// HoldNominated holds a nominated pod's capacity on snap: its requests and
// host ports on its node, and the devices of the claims allocated for it.
func (s *Snapshot) HoldNominated(np NominatedPod) {
	s.Reserve(np.Node, np.Pod, np.Claims)
}
