package webhook

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// nodeLabels counts, per label key, the nodes that carry it — the one
// question admission asks of the nodes ("does any node carry this
// topology key?"). It is fed by a metadata-only informer (no node's spec
// or status is cached) and updated per event, so an answer is a map read
// and admission makes no API call for it.
type nodeLabels struct {
	mu     sync.RWMutex
	counts map[string]int
	// capacity counts the nodes of each capacity type (from the same
	// labels: podgroup.NodeCapacityType).
	capacity map[podgroup.CapacityType]int
	// byNode are each node's labels (metadata only).
	byNode map[string]map[string]string
}

func newNodeLabels() *nodeLabels {
	return &nodeLabels{counts: map[string]int{}, capacity: map[podgroup.CapacityType]int{}, byNode: map[string]map[string]string{}}
}

// matching are the nodes (name → labels) that match: the nodes a
// template's required node selection reaches, by their labels and names.
func (n *nodeLabels) matching(match func(name string, labels map[string]string) bool) map[string]map[string]string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := map[string]map[string]string{}
	for name, labels := range n.byNode {
		if match(name, labels) {
			out[name] = labels
		}
	}
	return out
}

// watchNodeLabels registers the metadata informer of nodes with the
// manager's cache (started, and synced before admission is served, with
// the others) and feeds n from it.
func watchNodeLabels(ctx context.Context, c ctrlcache.Cache, n *nodeLabels) error {
	nodes := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
	inf, err := c.GetInformer(ctx, nodes)
	if err != nil {
		return fmt.Errorf("informer for node metadata: %w", err)
	}
	_, err = inf.AddEventHandler(n.handler())
	return err
}

func (n *nodeLabels) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.count(obj, 1) },
		UpdateFunc: func(old, obj any) { n.count(old, -1); n.count(obj, 1) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			n.count(obj, -1)
		},
	}
}

// count adds delta for each label key of obj.
func (n *nodeLabels) count(obj any, delta int) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for k := range o.GetLabels() {
		if n.counts[k] += delta; n.counts[k] <= 0 {
			delete(n.counts, k)
		}
	}
	if delta > 0 {
		n.byNode[o.GetName()] = o.GetLabels()
	} else {
		delete(n.byNode, o.GetName())
	}
	t := podgroup.NodeCapacityType(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: o.GetLabels()}})
	if n.capacity[t] += delta; n.capacity[t] <= 0 {
		delete(n.capacity, t)
	}
}

// ofCapacity reports how many nodes are of capacity type t.
func (n *nodeLabels) ofCapacity(t podgroup.CapacityType) int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.capacity[t]
}

// carried reports how many nodes carry the label key.
func (n *nodeLabels) carried(key string) int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.counts[key]
}
