package webhook

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/cel"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-dev/lockstep/internal/dra"
)

// deviceIndex counts, per DeviceClass, the devices of every ResourceSlice
// the class's selectors match — the one question admission asks of the
// inventory ("does any device of this class exist?"). It is recomputed, from
// the cache, only after a slice or class changed, so a burst of pods costs
// map reads, not a LIST and a CEL pass per pod.
type deviceIndex struct {
	reader client.Reader
	cel    *cel.Cache

	mu     sync.Mutex
	dirty  bool
	counts map[string]int // class → matching devices; absent: no such class
	// nodes are, per class, the nodes whose own slices publish a matching
	// device; anywhere the classes a slice not bound to one node serves
	// (a node selector or all nodes: any node may have it).
	nodes    map[string]map[string]bool
	anywhere map[string]bool
	// extended are, per extended resource name, the classes that serve it
	// (their extendedResourceName, or deviceclass.resource.kubernetes.io/<class>).
	extended map[corev1.ResourceName][]string
	// attrs are the qualified attribute names ("domain/name"; a name
	// published without a domain is its driver's) some device carries.
	attrs map[string]bool
}

func newDeviceIndex(reader client.Reader, c *cel.Cache) *deviceIndex {
	return &deviceIndex{reader: reader, cel: c, dirty: true}
}

// invalidate is the informer handler of slices and classes.
func (d *deviceIndex) invalidate() {
	d.mu.Lock()
	d.dirty = true
	d.mu.Unlock()
}

func (d *deviceIndex) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.invalidate() },
		UpdateFunc: func(any, any) { d.invalidate() },
		DeleteFunc: func(any) { d.invalidate() },
	}
}

// count returns the devices of a class and whether the class exists.
func (d *deviceIndex) count(class string) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refresh()
	n, ok := d.counts[class]
	return n, ok
}

// hasAttribute reports whether some device carries the qualified attribute
// attr; known is false when the inventory could not be read.
func (d *deviceIndex) hasAttribute(attr string) (has, known bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refresh()
	return d.attrs[attr], d.attrs != nil
}

// onNodes reports, for class, the nodes whose slices publish one of its
// devices and whether a slice not bound to one node serves it; known is
// false when the inventory could not be read.
func (d *deviceIndex) onNodes(class string) (nodes map[string]bool, anywhere, known bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refresh()
	return d.nodes[class], d.anywhere[class], d.counts != nil
}

// serving are the classes that serve the extended resource name; known is
// false when the inventory could not be read.
func (d *deviceIndex) serving(name corev1.ResourceName) (classes []string, known bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refresh()
	return d.extended[name], d.counts != nil
}

// refresh recounts after a change (d.mu held).
func (d *deviceIndex) refresh() {
	if d.dirty {
		if counts, attrs, err := d.recount(context.Background()); err == nil {
			d.counts, d.attrs, d.dirty = counts, attrs, false
		}
	}
}

// recount reads the classes and slices again: the counts and attributes it
// returns, the per-node view it sets (d.mu held).
func (d *deviceIndex) recount(ctx context.Context) (map[string]int, map[string]bool, error) {
	classes := &resourcev1.DeviceClassList{}
	if err := d.reader.List(ctx, classes); err != nil {
		return nil, nil, err
	}
	list := &resourcev1.ResourceSliceList{}
	if err := d.reader.List(ctx, list); err != nil {
		return nil, nil, err
	}
	slices := make([]*resourcev1.ResourceSlice, 0, len(list.Items))
	attrs := map[string]bool{}
	for i := range list.Items {
		s := &list.Items[i]
		slices = append(slices, s)
		for _, dev := range s.Spec.Devices {
			for name := range dev.Attributes {
				q := string(name)
				if !strings.Contains(q, "/") {
					q = s.Spec.Driver + "/" + q
				}
				attrs[q] = true
			}
		}
	}
	byNode := map[string][]*resourcev1.ResourceSlice{}
	var shared []*resourcev1.ResourceSlice
	for _, s := range slices {
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			byNode[*s.Spec.NodeName] = append(byNode[*s.Spec.NodeName], s)
		} else {
			shared = append(shared, s)
		}
	}
	out := make(map[string]int, len(classes.Items))
	nodes, anywhere := map[string]map[string]bool{}, map[string]bool{}
	extended := map[corev1.ResourceName][]string{}
	for i := range classes.Items {
		c := &classes.Items[i]
		extended[corev1.ResourceName(resourcev1.ResourceDeviceClassPrefix+c.Name)] = append(extended[corev1.ResourceName(resourcev1.ResourceDeviceClassPrefix+c.Name)], c.Name)
		if n := c.Spec.ExtendedResourceName; n != nil {
			extended[corev1.ResourceName(*n)] = append(extended[corev1.ResourceName(*n)], c.Name)
		}
		for node, ss := range byNode {
			if n := dra.CountClassIn(ctx, d.cel, c, ss, nil).Total; n > 0 {
				if nodes[c.Name] == nil {
					nodes[c.Name] = map[string]bool{}
				}
				nodes[c.Name][node] = true
				out[c.Name] += n
			}
		}
		// Counted apart only to know which nodes have them; partitions and
		// their counters are published in one node's pool, so the totals
		// agree with counting all slices at once.
		n := dra.CountClassIn(ctx, d.cel, c, shared, nil).Total
		out[c.Name] += n
		anywhere[c.Name] = n > 0
	}
	d.nodes, d.anywhere, d.extended = nodes, anywhere, extended
	return out, attrs, nil
}
