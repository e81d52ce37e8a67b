package integrity

import (
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// ReasonStoppedMemberSucceeded is the Warning event of a Job's pod that
// Lockstep stopped — a gang restart, a preemption, an unhealthy device — and
// whose containers then exited 0. The kubelet reports such a pod Succeeded
// (as it would under kube-scheduler's preemption), so its Job counts the
// pod's index as completed and never runs it again: the gang cannot run
// whole until the Job is recreated. Nothing Lockstep can write changes that
// count without racing the kubelet or releasing the pod's devices while its
// containers still run; the rank must exit non-zero when it is stopped
// before it finishes, as a process killed by SIGTERM (143) or torchrun
// (1) does.
const ReasonStoppedMemberSucceeded = "StoppedMemberSucceeded"

// stoppedButSucceeded says why p, a Job's pod Lockstep stopped, ended
// Succeeded; "" when it did not.
func stoppedButSucceeded(p *corev1.Pod) string {
	c := podgroup.Disruption(p)
	if c == nil || p.Status.Phase != corev1.PodSucceeded || p.Labels[batchv1.JobNameLabel] == "" {
		return ""
	}
	switch c.Reason {
	case PodReason, PodReasonDeviceUnhealthy, corev1.PodReasonPreemptionByScheduler:
	default:
		return ""
	}
	index := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if index == "" {
		index = "(non-indexed)"
	}
	return fmt.Sprintf("pod %s was stopped by Lockstep (%s) but its containers exited 0, so Job %s counts its index %s as completed "+
		"and will not run it again: the gang cannot run whole until the Job is recreated. Make the rank exit non-zero when it is "+
		"stopped before it finishes (a process killed by SIGTERM exits 143, torchrun exits 1)", p.Name, c.Reason, p.Labels[batchv1.JobNameLabel], index)
}

// warnedPods remembers the pods warned about, so each is warned about once
// per process however often its group is reconciled.
type warnedPods struct{ m sync.Map }

func (w *warnedPods) first(uid types.UID) bool {
	_, seen := w.m.LoadOrStore(uid, struct{}{})
	return !seen
}
