package provision

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// FitsWith is the cycle's decision (st) of the unit named self with planned nodes
// added: whether it would bind, on the cycle's own view (nominations
// held), without preempting. The planned nodes exist only for the
// decision.
func FitsWith(ctx context.Context, st *cycle.State, self string, tu *podgroup.TreeUnit, prio int32) Fits {
	return func(nodes []*corev1.Node, slices []*resourcev1.ResourceSlice) (bool, string) {
		for _, n := range nodes {
			st.Cache.AddNode(n)
		}
		for _, sl := range slices {
			st.Cache.AddSlice(sl)
		}
		defer func() {
			for _, sl := range slices {
				st.Cache.DeleteSlice(sl)
			}
			for _, n := range nodes {
				st.Cache.DeleteNode(n)
			}
		}()
		d := decide.Decide(ctx, st.Snapshot(ctx, self, prio), st.CEL, decide.Input{Unit: tu, Priority: prio, DryRun: true})
		if d.Kind == decide.Bind {
			return true, ""
		}
		why := d.Summary
		if d.Reason != "" {
			why += ": " + d.Reason
		}
		return false, why
	}
}
