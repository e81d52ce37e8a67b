package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// ErrInvalidClaim marks a claim the allocator cannot evaluate at all (a CEL
// error, an unknown DeviceClass): a SchedulerError, not "does not fit".
var ErrInvalidClaim = errors.New("invalid claim")

// NodeFailure is the allocator's "fails on this node only"
// (structured.ErrFailedAllocationOnNode, e.g. an invalid pool among the
// node's slices): the claims do not fit on this node, for Reason, and other
// nodes may still be tried — as kube-scheduler's DynamicResources plugin
// filters the node out rather than failing the pod.
type NodeFailure struct {
	// Reason is the allocator's text ("invalid resource pools were
	// encountered"): the same on every node it applies to, so it counts.
	Reason string
}

func (e *NodeFailure) Error() string { return e.Reason }

// Allocator allocates claims against one snapshot. It is not safe for
// concurrent use (it shares the snapshot, which placement mutates).
type Allocator struct {
	snap  *snapshot.Snapshot
	cache *cel.Cache
	// keep, when set, is which devices may be allocated (a topology
	// domain's device value); kept caches each slice so filtered.
	keep func(driver string, d *resourcev1.Device) bool
	kept map[*resourcev1.ResourceSlice]*resourcev1.ResourceSlice
	// answers remembers Allocate's answers (see answers).
	answers answers
}

// Restrict returns an allocator over the same snapshot that allocates only
// devices keep accepts (nil: every device — a itself when it is not
// restricted either, with the answers it remembers).
func (a *Allocator) Restrict(keep func(driver string, d *resourcev1.Device) bool) *Allocator {
	if keep == nil && a.keep == nil {
		return a
	}
	return &Allocator{snap: a.snap, cache: a.cache, keep: keep}
}

// offered is s as the allocator may use it: s, or a copy holding only the
// devices keep accepts.
func (a *Allocator) offered(s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
	if a.keep == nil {
		return s
	}
	if f, ok := a.kept[s]; ok {
		return f
	}
	f := s.DeepCopy()
	f.Spec.Devices = f.Spec.Devices[:0]
	for i := range s.Spec.Devices {
		if a.keep(s.Spec.Driver, &s.Spec.Devices[i]) {
			f.Spec.Devices = append(f.Spec.Devices, s.Spec.Devices[i])
		}
	}
	if a.kept == nil {
		a.kept = map[*resourcev1.ResourceSlice]*resourcev1.ResourceSlice{}
	}
	a.kept[s] = f
	return f
}

// New returns an allocator over snap. cache may be shared across cycles.
func New(snap *snapshot.Snapshot, cache *cel.Cache) *Allocator {
	return &Allocator{snap: snap, cache: cache}
}

// NewCache returns a CEL cache sized for a scheduler.
func NewCache() *cel.Cache { return cel.NewCache(1024, cel.Features{}) }

// Allocate computes allocations for the unallocated claims on node. It
// returns (nil, nil) when they do not fit there, a *NodeFailure when the
// allocator fails on this node only (they do not fit here, for its reason),
// an ErrInvalidClaim-wrapped error when a claim or class cannot be
// evaluated at all. Only the node's own slices and the
// cluster-wide ones are offered to the allocator, so the cost of one call
// does not grow with the cluster. An answer given before in the same state
// is given again without asking the allocator (answers).
func (a *Allocator) Allocate(ctx context.Context, node *snapshot.NodeInfo, claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	key, ok := a.answers.key(a.snap, node, claims)
	if ok {
		if results, known := a.answers.known[key]; known {
			return slices.Clone(results), nil
		}
	}
	results, err := a.allocate(ctx, node, claims)
	if ok && err == nil {
		a.answers.remember(key, results) // the caller reads results, never writes them
	}
	return results, err
}

// allocate is Allocate without the answers remembered.
func (a *Allocator) allocate(ctx context.Context, node *snapshot.NodeInfo, claims []*resourcev1.ResourceClaim) ([]resourcev1.AllocationResult, error) {
	in := node.Slices
	if len(a.snap.GlobalSlices) > 0 {
		in = append(append([]*resourcev1.ResourceSlice(nil), node.Slices...), a.snap.GlobalSlices...)
	}
	if a.keep != nil {
		offered := make([]*resourcev1.ResourceSlice, len(in))
		for i, s := range in {
			offered[i] = a.offered(s)
		}
		in = offered
	}
	alloc, err := structured.NewAllocator(ctx, a.snap.Features.Allocator, structured.AllocatedState{AllocatedDevices: a.snap.Allocated, AllocatedSharedDeviceIDs: a.snap.Shared, AggregatedCapacity: a.snap.Consumed}, classLister(a.snap.Classes), in, a.cache)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidClaim, err)
	}
	results, err := alloc.Allocate(ctx, node.Node, claims)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, err
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return nil, &NodeFailure{Reason: err.Error()}
	default:
		return nil, fmt.Errorf("%w: %w", ErrInvalidClaim, err)
	}
	return results, nil
}

// NodeMatches reports whether an allocated claim can be used on node.
func NodeMatches(f structured.Features, node *corev1.Node, alloc *resourcev1.AllocationResult) (bool, error) {
	if alloc == nil || alloc.NodeSelector == nil {
		return true, nil
	}
	return structured.NodeMatches(f, node, "", false, alloc.NodeSelector)
}

type classLister map[string]*resourcev1.DeviceClass

func (l classLister) List() ([]*resourcev1.DeviceClass, error) {
	out := make([]*resourcev1.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourcev1.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}
