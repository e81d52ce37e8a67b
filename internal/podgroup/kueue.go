package podgroup

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Kueue's names for what holds a pod: the scheduling gate it keeps on a
// pod until it admits the pod's workload, and the label naming the
// LocalQueue the workload waits in (on a job, or on the pods of a Kueue pod
// group).
const (
	KueueAdmissionGate = "kueue.x-k8s.io/admission"
	KueueQueueLabel    = "kueue.x-k8s.io/queue-name"
	// KueueGroupLabel names the Kueue pod group a pod belongs to; a
	// Lockstep pod joins the PodGroup of that name.
	KueueGroupLabel = "kueue.x-k8s.io/pod-group-name"
)

// ClusterQueueOf names the ClusterQueue that Kueue LocalQueue ns/name feeds
// (its spec.clusterQueue); an error says why that could not be read (a
// NotFound error: the LocalQueue does not exist). The caller that reads the
// API supplies it — the scheduler from its informer, the controllers and
// explain from the API server — podgroup never reads anything.
type ClusterQueueOf func(ns, name string) (string, error)

// Option adds to what Resolve, ResolvePod and ResolveTree know besides the
// group and its pods.
type Option func(*options)

type options struct {
	clusterQueueOf ClusterQueueOf
}

// WithClusterQueues lets a unit Kueue holds name the ClusterQueue it waits
// for (KueueWaiting); without it, its words name the LocalQueue only.
func WithClusterQueues(f ClusterQueueOf) Option {
	return func(o *options) { o.clusterQueueOf = f }
}

func resolveOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// KueueWaiting is what a workload Kueue holds (its pods gated by Kueue's
// admission gate, or its job suspended by Kueue) waits for, in the words
// the scheduler's condition, the integrity controller's Running condition
// and explain share: "waiting for Kueue admission in ClusterQueue gpus
// (LocalQueue ml/team)". queues are the LocalQueues of namespace ns it names
// (none: Kueue's default queue, unnamed). A LocalQueue whose ClusterQueue
// cannot be read is named with the reason; one that does not exist is
// named with the fix. Such a workload is not demand on the cluster: the
// scheduler never marks its pods Unschedulable, and the words say who lets
// it go.
func KueueWaiting(ns string, queues []string, cq ClusterQueueOf) string {
	const prefix = "waiting for Kueue admission"
	parts := make([]string, 0, len(queues))
	for _, q := range queues {
		parts = append(parts, kueueQueue(ns, q, cq))
	}
	if len(parts) == 0 {
		return prefix
	}
	return prefix + " " + strings.Join(parts, " and ")
}

// kueueQueue names where a workload of LocalQueue ns/q waits.
func kueueQueue(ns, q string, cq ClusterQueueOf) string {
	lq := fmt.Sprintf("LocalQueue %s/%s", ns, q)
	if cq == nil {
		return "in " + lq
	}
	name, err := cq(ns, q)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("in %s, which does not exist: create it, or name an existing LocalQueue in the label %s", lq, KueueQueueLabel)
	case err != nil:
		return fmt.Sprintf("in %s (its ClusterQueue could not be read: %v)", lq, err)
	case name == "":
		return fmt.Sprintf("in %s (it names no ClusterQueue: set its spec.clusterQueue)", lq)
	}
	return fmt.Sprintf("in ClusterQueue %s (%s)", name, lq)
}

// gatedBy says what holds gated members: Kueue, when its admission gate is
// among the gates (KueueWaiting), else the gates.
func (u *Unit) gatedBy(ns string, o options) string {
	if !slices.Contains(u.Gates, KueueAdmissionGate) {
		return "waiting for scheduling gates"
	}
	return KueueWaiting(ns, u.queues, o.clusterQueueOf)
}
