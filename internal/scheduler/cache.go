package scheduler

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/dra"
)

// assumed holds decisions written (or being written) but not yet seen by
// the informers, so the next cycle cannot hand the same node capacity or
// devices out again. Entries leave when the informer shows the write, or
// after ttl (the write was lost, e.g. the pod was deleted).
//
//	assume ──► assumed ──informer confirms──► (gone)
//	              │ forget (rollback) / ttl
//	              ▼
//	            (gone)
type assumed struct {
	mu     sync.Mutex
	ttl    time.Duration
	pods   map[types.UID]assumedPod
	claims map[types.NamespacedName]assumedClaim
}

// pinned entries (a binding in flight) never expire; unpinning starts the
// ttl.
type assumedPod struct {
	node   string
	at     time.Time
	pinned bool
}

type assumedClaim struct {
	claim  *resourcev1.ResourceClaim
	at     time.Time
	pinned bool
}

func newAssumed(ttl time.Duration) *assumed {
	return &assumed{ttl: ttl, pods: map[types.UID]assumedPod{}, claims: map[types.NamespacedName]assumedClaim{}}
}

func (a *assumed) assumePod(uid types.UID, node string, pinned bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pods[uid] = assumedPod{node: node, at: time.Now(), pinned: pinned}
}

// assumeClaim records a claim as written (or, pinned, as about to be
// written by a binding in flight); a pin the entry has is kept.
func (a *assumed) assumeClaim(c *resourcev1.ResourceClaim, pinned bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	a.claims[key] = assumedClaim{claim: c, at: time.Now(), pinned: pinned || a.claims[key].pinned}
}

func (a *assumed) unpinPod(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pods[uid]; ok {
		p.pinned, p.at = false, time.Now()
		a.pods[uid] = p
	}
}

func (a *assumed) unpinClaim(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.claims[key]; ok {
		c.pinned, c.at = false, time.Now()
		a.claims[key] = c
	}
}

func (a *assumed) forgetPod(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pods, uid)
}

func (a *assumed) forgetClaim(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.claims, key)
}

// overlay returns pods and claims as the scheduler must see them: the
// informer's objects with assumed bindings and allocations applied. It also
// drops entries the informer has confirmed or that expired.
func (a *assumed) overlay(pods []*corev1.Pod, claims []*resourcev1.ResourceClaim) ([]*corev1.Pod, []*resourcev1.ResourceClaim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if len(a.pods) > 0 {
		out := make([]*corev1.Pod, 0, len(pods))
		for _, p := range pods {
			ap, ok := a.pods[p.UID]
			switch {
			case !ok:
			case p.Spec.NodeName != "" || !ap.pinned && now.Sub(ap.at) > a.ttl:
				delete(a.pods, p.UID)
			default:
				cp := p.DeepCopy()
				cp.Spec.NodeName = ap.node
				p = cp
			}
			out = append(out, p)
		}
		pods = out
	}
	if len(a.claims) > 0 {
		out := make([]*resourcev1.ResourceClaim, 0, len(claims))
		seen := make(map[types.NamespacedName]bool, len(a.claims))
		for _, c := range claims {
			key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
			ac, ok := a.claims[key]
			seen[key] = ok
			switch {
			case !ok:
			case !ac.pinned && (c.Status.Allocation != nil && len(c.Status.ReservedFor) >= len(ac.claim.Status.ReservedFor) || now.Sub(ac.at) > a.ttl):
				delete(a.claims, key)
			default:
				c = ac.claim
			}
			out = append(out, c)
		}
		// Claims the scheduler created (for extended resources) that the
		// informer has not shown yet hold their devices already.
		for key, ac := range a.claims {
			switch {
			case seen[key] || !dra.IsExtendedClaim(ac.claim):
			case !ac.pinned && now.Sub(ac.at) > a.ttl:
				delete(a.claims, key)
			default:
				out = append(out, ac.claim)
			}
		}
		claims = out
	}
	return pods, claims
}

// podNode returns the node a pod is assumed on, if any.
func (a *assumed) podNode(uid types.UID) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pods[uid]
	return p.node, ok
}
