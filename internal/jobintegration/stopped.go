package jobintegration

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Condition is a job's status condition as StoppedBy reads it.
type Condition struct{ Type, Status, Reason string }

// StoppedBy is Stopped for the kinds that say it with a suspend flag and
// status conditions (a Job, a JobSet, the Kubeflow jobs): suspended; else
// complete at the first True condition of a type in complete, failed
// ("failed: <reason>") at the first of a type in failed. read turns one of
// the kind's conditions into a Condition.
func StoppedBy[C any](suspended bool, conds []C, read func(*C) Condition, complete, failed []string) (why string, isFailed, isSuspended bool) {
	if suspended {
		return "suspended", false, true
	}
	for i := range conds {
		c := read(&conds[i])
		if c.Status != string(corev1.ConditionTrue) {
			continue
		}
		switch {
		case slices.Contains(complete, c.Type):
			return "complete", false, false
		case slices.Contains(failed, c.Type):
			return "failed: " + c.Reason, true, false
		}
	}
	return "", false, false
}

// KueueHeld is what a job Kueue keeps suspended waits for, in the words
// the scheduler and explain use (podgroup.KueueWaiting): the job is
// suspended and queued in Kueue (it names a LocalQueue: label
// kueue.x-k8s.io/queue-name), so it runs once Kueue admits it into that
// queue's ClusterQueue, which cq names. "" for a job that is not
// suspended, or not queued.
func KueueHeld(j GenericJob, cq podgroup.ClusterQueueOf) string {
	q := j.Object().GetLabels()[podgroup.KueueQueueLabel]
	if _, _, suspended := j.Stopped(); !suspended || q == "" {
		return ""
	}
	return podgroup.KueueWaiting(j.Object().GetNamespace(), []string{q}, cq)
}
