package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/provision"
)

// shortfallTTL is how long a unit's shortfall is kept while the nodes
// and its pending members stay as they were: planning costs decisions,
// and a unit that does not fit is retried at every change of the cluster.
const shortfallTTL = 10 * time.Minute

// shortfalls remembers, per unit, what more nodes would make it fit.
type shortfalls struct {
	mu sync.Mutex
	m  map[string]shortfallMemo
}

type shortfallMemo struct {
	sig  string
	at   time.Time
	says string
}

// shortfall says how many more nodes of which node group would make a
// gang that does not fit fit, for the nodes no autoscaler Lockstep drives
// makes: every node without --karpenter, else those of static NodePools
// and of no NodePool (node groups). "" for a lone pod (one node more of
// any group would do: kube-scheduler's autoscalers know that) or when no
// group's nodes would.
func (s *Scheduler) shortfall(ctx context.Context, u *unit, prio int32) string {
	if !u.multiMember() {
		return ""
	}
	var dynamic map[string]bool
	if p := s.provisioner.Load(); p != nil {
		pools, err := p.nodePools()
		if err != nil {
			return ""
		}
		dynamic = map[string]bool{}
		for _, np := range pools {
			if !np.Static {
				dynamic[np.Name] = true
			}
		}
	}
	unit, now := u.key.String(), s.clock.Now()
	sig := fmt.Sprintf("%d/%d/%d", len(s.state.Cache.Update().Nodes), u.pendingCount(), len(dynamic))
	s.shortfalls.mu.Lock()
	memo, ok := s.shortfalls.m[unit]
	s.shortfalls.mu.Unlock()
	if ok && memo.sig == sig && now.Sub(memo.at) < shortfallTTL {
		return memo.says
	}
	says := provision.NodeShortfall(ctx, s.state, unit, u.tree, prio, func(n *corev1.Node) bool {
		return dynamic[n.Labels[provision.NodePoolLabel]]
	})
	s.shortfalls.mu.Lock()
	defer s.shortfalls.mu.Unlock()
	if s.shortfalls.m == nil {
		s.shortfalls.m = map[string]shortfallMemo{}
	}
	for k, m := range s.shortfalls.m {
		if now.Sub(m.at) > shortfallTTL {
			delete(s.shortfalls.m, k)
		}
	}
	s.shortfalls.m[unit] = shortfallMemo{sig: sig, at: now, says: says}
	return says
}

// joinNote joins two parts of a message with "; " (either may be empty).
func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
