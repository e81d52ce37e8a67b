package integrity

import (
	"context"
	"fmt"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lockstep-dev/lockstep/internal/cachetrim"
)

// sliceSource is the controller's view of ResourceSlices with
// DeviceTaintRules applied — k8s.io/dynamic-resource-allocation's tracker,
// which kube-scheduler and kube-controller-manager's device-taint-eviction
// controller use, so a rule selects exactly the devices it does for them —
// kept as an index of device taints current from its events, and the event
// source that wakes the groups a slice change concerns.
type sliceSource struct {
	kube       kubernetes.Interface
	taintRules bool
	groups     func(context.Context, *resourcev1.ResourceSlice) []reconcile.Request
	// taints is the index of device taints.
	taints *taintIndex

	mu      sync.Mutex
	tracker *tracker.Tracker
	indexed cache.ResourceEventHandlerRegistration
}

var _ source.SyncingSource = (*sliceSource)(nil)

// Start starts the informers and the tracker; it does not block.
func (s *sliceSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	f := informers.NewSharedInformerFactoryWithOptions(s.kube, 0, informers.WithTransform(cachetrim.Transform))
	opts := tracker.Options{EnableDeviceTaintRules: s.taintRules, SliceInformer: f.Resource().V1().ResourceSlices(), KubeClient: s.kube}
	if s.taintRules {
		opts.TaintInformer = f.Resource().V1().DeviceTaintRules()
	}
	t, err := tracker.StartTracker(ctx, opts)
	if err != nil {
		return fmt.Errorf("ResourceSlice tracker: %w", err)
	}
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if sl, ok := obj.(*resourcev1.ResourceSlice); ok {
			for _, r := range s.groups(ctx, sl) {
				q.Add(r)
			}
		}
	}
	// One handler, the index first: a group woken by a slice event finds
	// the taints that event brought.
	indexed, err := t.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.taints.set(o); enqueue(o) },
		UpdateFunc: func(_, o any) { s.taints.set(o); enqueue(o) },
		DeleteFunc: func(o any) { s.taints.forget(o); enqueue(o) },
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	s.mu.Lock()
	s.tracker, s.indexed = t, indexed
	s.mu.Unlock()
	return nil
}

// WaitForSync blocks until the tracker has synced and the index has seen
// every slice it listed.
func (s *sliceSource) WaitForSync(ctx context.Context) error {
	s.mu.Lock()
	t, indexed := s.tracker, s.indexed
	s.mu.Unlock()
	if t == nil {
		return fmt.Errorf("ResourceSlice tracker not started")
	}
	if !cache.WaitForCacheSync(ctx.Done(), t.HasSynced, indexed.HasSynced) {
		return fmt.Errorf("ResourceSlice tracker did not sync")
	}
	return nil
}

func (s *sliceSource) String() string { return "ResourceSlices (DeviceTaintRules applied)" }
