package webhook

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// nodeLabels counts, per label key, the nodes that carry it — the
// question admission asks of the nodes most ("does any node carry this
// topology key?") — and keeps each node's labels and the extended
// resources it advertises as allocatable (the driver-path check). It is
// fed by an informer of nodes trimmed to those two (trimNode: no spec, no
// other status) and updated per event, so an answer is a map read and
// admission makes no API call for it.
type nodeLabels struct {
	mu     sync.RWMutex
	counts map[string]int
	// capacity counts the nodes of each capacity type (from the same
	// labels: podgroup.NodeCapacityType).
	capacity map[podgroup.CapacityType]int
	// byNode are each node's labels (metadata only).
	byNode map[string]map[string]string
	// extended are, per node, the extended resources (nvidia.com/gpu,
	// vpc.amazonaws.com/efa, …) it advertises a non-zero allocatable of.
	extended map[string]map[corev1.ResourceName]bool
}

func newNodeLabels() *nodeLabels {
	return &nodeLabels{counts: map[string]int{}, capacity: map[podgroup.CapacityType]int{},
		byNode: map[string]map[string]string{}, extended: map[string]map[corev1.ResourceName]bool{}}
}

// reachedBy are the nodes (name → labels) the required node selection of
// spec (node selector, required node affinity) reaches; nil when it
// selects nothing, every node being reached.
func (n *nodeLabels) reachedBy(spec *corev1.PodSpec) map[string]map[string]string {
	aff := spec.Affinity
	if len(spec.NodeSelector) == 0 && (aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		return nil
	}
	required := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec})
	return n.matching(func(name string, labels map[string]string) bool {
		ok, _ := required.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		return ok
	})
}

// advertising are the nodes (name → labels) that advertise a non-zero
// allocatable of the extended resource name.
func (n *nodeLabels) advertising(name corev1.ResourceName) map[string]map[string]string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := map[string]map[string]string{}
	for node, has := range n.extended {
		if has[name] {
			out[node] = n.byNode[node]
		}
	}
	return out
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

// watchNodeLabels registers the informer of nodes with the manager's cache
// (started, and synced before admission is served, with the others; its
// objects trimmed by trimNode) and feeds n from it.
func watchNodeLabels(ctx context.Context, c ctrlcache.Cache, n *nodeLabels) error {
	inf, err := c.GetInformer(ctx, &corev1.Node{})
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
		n.extended[o.GetName()] = extendedAllocatable(obj)
	} else {
		delete(n.byNode, o.GetName())
		delete(n.extended, o.GetName())
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

// extendedAllocatable are the extended resources obj (a Node; nil for
// metadata alone) advertises a non-zero allocatable of.
func extendedAllocatable(obj any) map[corev1.ResourceName]bool {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	var out map[corev1.ResourceName]bool
	for name, q := range node.Status.Allocatable {
		if v1helper.IsExtendedResourceName(name) && !q.IsZero() {
			if out == nil {
				out = map[corev1.ResourceName]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// trimNode is the webhook's transform of cached Nodes: their name, labels
// and extended allocatable resources are all admission reads, so the rest
// (spec, conditions, images, addresses, annotations) is not kept.
func trimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return cachetrim.Transform(obj)
	}
	out := &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion, Labels: node.Labels,
	}}
	for name, q := range node.Status.Allocatable {
		if v1helper.IsExtendedResourceName(name) {
			if out.Status.Allocatable == nil {
				out.Status.Allocatable = corev1.ResourceList{}
			}
			out.Status.Allocatable[name] = q
		}
	}
	return out, nil
}
