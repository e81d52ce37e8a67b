package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// cacheOptions keeps only the members of groups in the pod cache: the
// webhook asks about a group's members, never about other pods.
func cacheOptions() cache.Options {
	member, err := labels.NewRequirement(lockv1.PodGroupLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	return cache.Options{DefaultTransform: cachetrim.Transform, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:  {Label: labels.NewSelector().Add(*member)},
		&corev1.Node{}: {Transform: trimNode},
	}}
}

// setupCaches registers every informer admission reads from, so they start
// with the manager and are synced before the first request is answered
// (controller-runtime waits for registered informers before serving), the
// pod index by group (memberIndexOf), the tree index by parent, the device count index and the node label counts.
//
// CompositePodGroups are watched only when served: a webhook started
// without their CRD (an upgrade left it out) serves everything else,
// refuses a PodGroup that names a parent, and restarts once they are.
func setupCaches(ctx context.Context, mgr ctrl.Manager, composites bool) (reads, *deviceIndex, *nodeLabels, error) {
	c := mgr.GetCache()
	members, err := memberIndexOf(ctx, c)
	if err != nil {
		return reads{}, nil, nil, err
	}
	indexed := []client.Object{&lockv1.PodGroup{}}
	watched := []client.Object{&lockv1.PodGroup{}, &schedulingv1.PriorityClass{}, &corev1.ResourceQuota{}, &resourcev1.ResourceClaim{}, &resourcev1.ResourceClaimTemplate{}}
	if composites {
		indexed = append(indexed, &lockv1.CompositePodGroup{})
		watched = append(watched, &lockv1.CompositePodGroup{})
	}
	for _, o := range indexed {
		if err := mgr.GetFieldIndexer().IndexField(ctx, o, IndexParent, parentIndexValue); err != nil {
			return reads{}, nil, nil, err
		}
	}
	served, err := servedIntegrations(mgr)
	if err != nil {
		return reads{}, nil, nil, err
	}
	for _, integ := range served {
		watched = append(watched, integ.NewObject())
	}
	for _, o := range watched {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return reads{}, nil, nil, fmt.Errorf("informer for %T: %w", o, err)
		}
	}
	devices := newDeviceIndex(mgr.GetClient(), dra.NewCache())
	for _, o := range []client.Object{&resourcev1.ResourceSlice{}, &resourcev1.DeviceClass{}} {
		inf, err := c.GetInformer(ctx, o)
		if err != nil {
			return reads{}, nil, nil, fmt.Errorf("informer for %T: %w", o, err)
		}
		if _, err := inf.AddEventHandler(devices.handler()); err != nil {
			return reads{}, nil, nil, err
		}
	}
	nodes := newNodeLabels()
	if err := watchNodeLabels(ctx, c, nodes); err != nil {
		return reads{}, nil, nil, err
	}
	return reads{Cached: mgr.GetClient(), Live: mgr.GetAPIReader(), Members: members}, devices, nodes, nil
}

// memberIndexOf adds indexGroupMembers to the pod informer of c and
// returns its indexer, which hands out the cached pods themselves (the
// controller-runtime cache's List copies them).
func memberIndexOf(ctx context.Context, c cache.Cache) (memberIndex, error) {
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("informer for pods: %w", err)
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the pod informer (%T) has no indexer", inf)
	}
	if err := sii.AddIndexers(toolscache.Indexers{indexGroupMembers: podgroup.IndexByGroup}); err != nil {
		return nil, err
	}
	return sii.GetIndexer(), nil
}

// servedIntegrations are the integrations whose kind the API server serves
// now (a JobSet's Jobs are batch/v1, always served). The informers of the
// others are started on first use, should their CRDs be installed later.
func servedIntegrations(mgr ctrl.Manager) ([]jobintegration.Integration, error) {
	var out []jobintegration.Integration
	for _, integ := range integrationSet {
		gvk := integ.GVK()
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				ctrl.Log.WithName("webhook").Info("Integration not served by the API server (yet): its informer starts on first use", "kind", gvk.String())
				continue
			}
			return nil, err
		}
		out = append(out, integ)
	}
	return out, nil
}
