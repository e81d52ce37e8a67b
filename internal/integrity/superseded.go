package integrity

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/scheduler"
)

// A restart ends one incarnation of a gang, but its pods do not vanish at
// once: the Job controller holds each with its job-tracking finalizer until
// it has accounted it and, with backoffLimitPerIndex, keeps the last failed
// pod of every index until that index's replacement exists; a member that
// failed by itself is not deleted at all (Job history). So old members,
// Failed or being deleted, are still listed when the replacement gang is
// bound. They must not count as losses of the new gang, or every restart
// triggers the next one (each feeding the Job's pod-failure backoff).
// superseded tells them apart:
//
//   - a pod this controller evicted carries DisruptionTarget with reason
//     PodReason; once it is terminal or being deleted it is done with;
//   - the pods that were already Failed or being deleted when the gang was
//     restarted (the loss that caused it) and those it evicted are
//     remembered by UID until they are deleted. After a controller restart
//     only the first rule holds: an old failed member then causes one
//     extra restart, not a loop.
func (r *Reconciler) superseded(p *corev1.Pod) bool {
	if scheduler.HasDisruption(p, PodReason) && (p.DeletionTimestamp != nil || !scheduler.Active(p)) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended[p.UID]
}

// endIncarnation remembers pods of a gang being restarted: the members that
// were already gone when it was restarted, and each member it evicts, just
// before it is deleted (one it failed to evict is still a member).
func (r *Reconciler) endIncarnation(uids ...types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, uid := range uids {
		r.ended[uid] = true
	}
}
