package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamiclister"
	"k8s.io/client-go/tools/cache"

	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// localQueues names the ClusterQueue each Kueue LocalQueue feeds, so a unit
// Kueue holds says which ClusterQueue's admission it waits for
// (podgroup.KueueWaiting) — with or without the placement check. It reads
// an informer on LocalQueues, started once Kueue's API is served and the
// scheduler may list them; until then (or when it may not) why says so,
// and the words name the LocalQueue with that reason. Safe for concurrent
// use: Kueue installed after the scheduler started is watched from
// another goroutine (enableKueue).
type localQueues struct {
	mu     sync.RWMutex
	lister dynamiclister.Lister
	synced cache.InformerSynced
	why    error
}

// errLocalQueuesNotServed: Kueue's API is not served (the scheduler asks
// again every kueueDiscoveryInterval).
var errLocalQueuesNotServed = errors.New("the API server does not serve " + kueuecheck.LocalQueueResource.GroupResource().String())

// errLocalQueuesNotListed: the informer has not listed them yet.
var errLocalQueuesNotListed = errors.New("the scheduler has not listed the LocalQueues yet")

func (q *localQueues) set(l dynamiclister.Lister, synced cache.InformerSynced, why error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lister, q.synced, q.why = l, synced, why
}

// watching reports whether the informer is set up.
func (q *localQueues) watching() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.lister != nil
}

// get is LocalQueue ns/name from the informer.
func (q *localQueues) get(ns, name string) (*unstructured.Unstructured, error) {
	q.mu.RLock()
	l, synced, why := q.lister, q.synced, q.why
	q.mu.RUnlock()
	switch {
	case l == nil && why == nil:
		return nil, errLocalQueuesNotServed
	case l == nil:
		return nil, why
	case !synced():
		return nil, errLocalQueuesNotListed
	}
	return l.Namespace(ns).Get(name)
}

// clusterQueueOf is podgroup.ClusterQueueOf on the informer.
func (q *localQueues) clusterQueueOf(ns, name string) (string, error) {
	return kueuecheck.ClusterQueueOf(q.get)(ns, name)
}

// kueueWords is the resolve option that lets a unit Kueue holds name its
// ClusterQueue.
func (s *Scheduler) kueueWords() podgroup.Option {
	return podgroup.WithClusterQueues(s.localQueues.clusterQueueOf)
}

// localQueueProbeTimeout bounds the one list that asks whether the
// scheduler may read LocalQueues.
const localQueueProbeTimeout = 10 * time.Second

// watchLocalQueues sets up the LocalQueue informer where Kueue's API is
// served (s.kueueServed) and the scheduler may list LocalQueues — asked
// once, so that a scheduler without that right (a chart older than its
// binary) neither waits for an informer that never syncs nor logs its
// failures for ever: its words then name the LocalQueue, with the refusal.
// A LocalQueue created, changed or deleted queues the gated units naming
// it, so their words follow.
func (s *Scheduler) watchLocalQueues() error {
	if !s.kueueServed || s.localQueues.watching() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), localQueueProbeTimeout)
	defer cancel()
	_, err := s.dynamic.Resource(kueuecheck.LocalQueueResource).List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsForbidden(err) {
		s.localQueues.set(nil, nil, fmt.Errorf("the scheduler may not list LocalQueues (grant it list and watch on %s): %w", kueuecheck.LocalQueueResource.GroupResource(), err))
		return nil
	}
	inf := s.dynFactor.ForResource(kueuecheck.LocalQueueResource).Informer()
	if err := inf.SetTransform(cachetrim.Transform); err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.onLocalQueue,
		UpdateFunc: func(o, n any) {
			if localQueueTarget(o) != localQueueTarget(n) {
				s.onLocalQueue(n)
			}
		},
		DeleteFunc: s.onLocalQueue,
	})
	if err != nil {
		return err
	}
	s.handlers = append(s.handlers, reg.HasSynced)
	s.localQueues.set(dynamiclister.New(inf.GetIndexer(), kueuecheck.LocalQueueResource), reg.HasSynced, nil)
	return nil
}

// localQueueTarget is the ClusterQueue a LocalQueue object names (Kueue
// updates a LocalQueue's status with every workload; only this matters).
func localQueueTarget(obj any) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	cq, _, _ := unstructured.NestedString(u.Object, "spec", "clusterQueue")
	return cq
}

// onLocalQueue queues the units of the gated pods that name the LocalQueue.
func (s *Scheduler) onLocalQueue(obj any) {
	u, ok := unstructuredOf(obj)
	if !ok {
		return
	}
	pods, err := s.listers.pods.Pods(u.GetNamespace()).List(labels.SelectorFromSet(labels.Set{podgroup.KueueQueueLabel: u.GetName()}))
	if err != nil {
		return
	}
	unitKey := s.unitKeys()
	for _, p := range pods {
		if podgroup.Ours(p) && podgroup.Pending(p) && podgroup.Gated(p) {
			s.queue.Add(unitKey(p))
		}
	}
}
