package cycle

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/kubefilter"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// State is what cycles are decided from. Snapshot is not safe for
// concurrent use: one loop decides at a time, as the cache's snapshot is
// shared between cycles.
type State struct {
	Cache *snapshot.Cache
	// Filters are kube-scheduler's filters that read other pods and
	// volumes; nil decides without them (tests of the core alone).
	Filters *kubefilter.Filters
	// CEL compiles the device selectors (shared by the cycles).
	CEL   *cel.Cache
	Clock clock.PassiveClock
}

// Snapshot is what a cycle deciding the unit named self, of priority
// prio, sees: the cache brought up to date (with the decisions being
// written assumed; what the previous cycle did to the snapshot undone),
// the pod filters over it, the nodes reserved for it (v1beta1.ReservedForTaint)
// open to it, and every other unit's nomination of priority
// ≥ prio held.
func (st *State) Snapshot(ctx context.Context, self string, prio int32) *snapshot.Snapshot {
	snap := st.Cache.Update()
	snap.ReservedFor = podgroup.UnitHash(self)
	if st.Filters != nil {
		snap.Constraints = st.Filters.NewLazyView(snap.NodeObjects, st.Cache.Pods, st.Cache.AntiAffinityPods())
	}
	for _, n := range st.Cache.HeldNominations(self, prio, st.Clock.Now()) {
		if n.Restored {
			st.holdRestored(ctx, snap, n)
			continue
		}
		for _, np := range n.Pods {
			snap.HoldNominated(np)
		}
	}
	return snap
}

// holdRestored holds a nomination that knows only its pods' nodes: each
// pod is placed on its node as it would be there (requests, ports, and
// devices of its unallocated claims chosen as placement chooses them).
// A pod that no longer fits its node holds what it can: its requests.
func (st *State) holdRestored(ctx context.Context, snap *snapshot.Snapshot, n *snapshot.Nomination) {
	logger := klog.FromContext(ctx)
	for _, np := range n.Pods {
		pinned := np.Pod.DeepCopy()
		pinned.Spec.NodeName = np.Node
		m, ok := member(snap, pinned)
		if !ok {
			snap.HoldNominated(snapshot.NominatedPod{Pod: np.Pod, Node: np.Node})
			continue
		}
		res, err := placement.Place(ctx, snap, dra.New(snap, st.CEL), placement.Unit{Members: []placement.Member{m}})
		if err != nil || len(res.Assignments) == 0 {
			logger.V(3).Info("Nominated pod does not fit its node; holding its requests", "pod", klog.KObj(np.Pod), "node", np.Node, "err", err)
			snap.HoldNominated(snapshot.NominatedPod{Pod: np.Pod, Node: np.Node})
		}
	}
}

// member is a pod with its claims resolved on snap; false when one of
// them is not there.
func member(snap *snapshot.Snapshot, p *corev1.Pod) (placement.Member, bool) {
	m := placement.Member{Pod: p}
	for _, pc := range p.Spec.ResourceClaims {
		name, ok := snapshot.ClaimName(p, pc)
		key := types.NamespacedName{Namespace: p.Namespace, Name: name}
		if !ok || snap.Claims[key] == nil {
			return m, false
		}
		m.Claims = append(m.Claims, key)
	}
	return m, true
}
