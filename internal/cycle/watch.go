package cycle

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Hooks run after the cache has applied an event of their kind, in the
// same handler, so a unit an event wakes sees that event in its snapshot
// (the scheduler's wake-ups). Any may be nil.
type Hooks struct {
	Pods, Nodes, Claims, Classes, Slices toolscache.ResourceEventHandler
}

// WatchOptions say what the API server serves.
type WatchOptions struct {
	// TaintRules: resource.k8s.io/v1 DeviceTaintRules are served (and
	// readable): the slices are seen with the rules' taints applied.
	TaintRules bool
	Hooks      Hooks
}

// Watched is what Watch started.
type Watched struct {
	// Slices are the ResourceSlices with DeviceTaintRules applied.
	Slices *tracker.Tracker
	// Synced report whether the cache has seen every object the
	// informers listed.
	Synced []toolscache.InformerSynced
}

// Watch keeps c current from factory's informers — the only way the
// scheduler and explain fill a cache. The informers are registered on
// factory (start it afterwards); the slice tracker starts at once and
// stops with ctx.
func Watch(ctx context.Context, factory informers.SharedInformerFactory, client kubernetes.Interface, c *snapshot.Cache, opts WatchOptions) (*Watched, error) {
	w := &Watched{}
	h := opts.Hooks
	for _, reg := range []struct {
		inf  toolscache.SharedIndexInformer
		h    toolscache.ResourceEventHandler
		next toolscache.ResourceEventHandler
	}{
		{factory.Core().V1().Pods().Informer(), c.PodEvents(), h.Pods},
		{factory.Core().V1().Nodes().Informer(), c.NodeEvents(), h.Nodes},
		{factory.Resource().V1().ResourceClaims().Informer(), c.ClaimEvents(), h.Claims},
		{factory.Resource().V1().DeviceClasses().Informer(), c.ClassEvents(), h.Classes},
	} {
		r, err := reg.inf.AddEventHandler(then(reg.h, reg.next))
		if err != nil {
			return nil, err
		}
		w.Synced = append(w.Synced, r.HasSynced)
	}
	topts := tracker.Options{
		EnableDeviceTaintRules: opts.TaintRules,
		SliceInformer:          factory.Resource().V1().ResourceSlices(),
		KubeClient:             client,
	}
	if opts.TaintRules {
		topts.TaintInformer = factory.Resource().V1().DeviceTaintRules()
	}
	t, err := tracker.StartTracker(ctx, topts)
	if err != nil {
		return nil, fmt.Errorf("ResourceSlice tracker: %w", err)
	}
	w.Slices = t
	r, err := t.AddEventHandler(then(c.SliceEvents(), h.Slices))
	if err != nil {
		return nil, err
	}
	w.Synced = append(w.Synced, t.HasSynced, r.HasSynced)
	return w, nil
}

// then is a handler that runs first's, then next's (if any).
func then(first, next toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	if next == nil {
		return first
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			first.OnAdd(obj, false)
			next.OnAdd(obj, false)
		},
		UpdateFunc: func(oldObj, newObj any) {
			first.OnUpdate(oldObj, newObj)
			next.OnUpdate(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			first.OnDelete(obj)
			next.OnDelete(obj)
		},
	}
}
