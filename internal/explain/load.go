package explain

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/kubefilter"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// state is one read of everything the decision depends on.
type state struct {
	nodes   []corev1.Node
	pods    []corev1.Pod
	slices  []resourcev1.ResourceSlice
	classes []resourcev1.DeviceClass
	claims  []resourcev1.ResourceClaim
	groups  map[string]*lockv1.PodGroup // ns/name
	pdbs    []*policyv1.PodDisruptionBudget
	// filters are the scheduler's kube-scheduler filters, reading
	// namespaces from what was listed (nothing is watched).
	filters *kubefilter.Filters
}

func load(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) (*state, error) {
	st := &state{groups: map[string]*lockv1.PodGroup{}}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	st.nodes = nodes.Items
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	st.pods = pods.Items
	if slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); err == nil {
		st.slices = slices.Items
	}
	if classes, err := client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{}); err == nil {
		st.classes = classes.Items
	}
	if claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{}); err == nil {
		st.claims = claims.Items
	}
	if pdbs, err := client.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{}); err == nil {
		for i := range pdbs.Items {
			st.pdbs = append(st.pdbs, &pdbs.Items[i])
		}
	}
	if st.filters, err = loadFilters(ctx, client); err != nil {
		return nil, err
	}
	// In-tree groups first, so a Lockstep group of the same name wins, as in the scheduler.
	for _, gvr := range []schema.GroupVersionResource{podgroup.UpstreamResource, podgroup.Resource} {
		list, err := dyn.Resource(gvr).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, u := range list.Items {
			pg := &lockv1.PodGroup{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pg) == nil {
				st.groups[pg.Namespace+"/"+pg.Name] = pg
			}
		}
	}
	return st, nil
}

// snapshot builds the scheduler's view of the state.
func (st *state) snapshot() *snapshot.Snapshot {
	in := snapshot.Input{}
	for i := range st.nodes {
		in.Nodes = append(in.Nodes, &st.nodes[i])
	}
	for i := range st.pods {
		in.Pods = append(in.Pods, &st.pods[i])
	}
	for i := range st.slices {
		in.Slices = append(in.Slices, &st.slices[i])
	}
	for i := range st.classes {
		in.Classes = append(in.Classes, &st.classes[i])
	}
	for i := range st.claims {
		in.Claims = append(in.Claims, &st.claims[i])
	}
	// Through the scheduler's own cache, so the two read the objects alike.
	cache := snapshot.CacheFrom(in)
	snap := cache.Update()
	snap.Constraints = st.filters.NewView(snap.NodeObjects(), cache.Pods())
	return snap
}

func (st *state) claim(ns, name string) *resourcev1.ResourceClaim {
	for i := range st.claims {
		if st.claims[i].Namespace == ns && st.claims[i].Name == name {
			return &st.claims[i]
		}
	}
	return nil
}

func (st *state) pod(ns, name string) *corev1.Pod {
	for i := range st.pods {
		if st.pods[i].Namespace == ns && st.pods[i].Name == name {
			return &st.pods[i]
		}
	}
	return nil
}

// groupPriority is the scheduler's: the members' priority.
func (st *state) groupPriority(pg *lockv1.PodGroup) int32 {
	var members []*corev1.Pod
	for i := range st.pods {
		p := &st.pods[i]
		if p.Namespace == pg.Namespace && podgroup.GroupOf(p) == pg.Name {
			members = append(members, p)
		}
	}
	prio, _ := podgroup.Priority(members)
	return prio
}

// loadFilters builds the scheduler's kube-scheduler filters over what is
// listed once: namespaces (affinity namespaceSelectors) and the storage
// objects the volume filters read. Nothing is watched, and nothing is ever
// written: explain never binds.
func loadFilters(ctx context.Context, client kubernetes.Interface) (*kubefilter.Filters, error) {
	factory := informers.NewSharedInformerFactory(client, 0)
	add := func(store cache.Indexer, objs []runtime.Object) error {
		for _, o := range objs {
			if err := store.Add(o); err != nil {
				return err
			}
		}
		return nil
	}
	lists := []struct {
		store cache.Indexer
		list  func() (runtime.Object, error)
	}{
		{factory.Core().V1().Namespaces().Informer().GetIndexer(), func() (runtime.Object, error) {
			return client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		}},
		{factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer(), func() (runtime.Object, error) {
			return client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
		}},
		{factory.Core().V1().PersistentVolumes().Informer().GetIndexer(), func() (runtime.Object, error) {
			return client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		}},
		{factory.Storage().V1().StorageClasses().Informer().GetIndexer(), func() (runtime.Object, error) {
			return client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		}},
		{factory.Storage().V1().CSINodes().Informer().GetIndexer(), func() (runtime.Object, error) {
			return client.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
		}},
		{factory.Storage().V1().CSIDrivers().Informer().GetIndexer(), func() (runtime.Object, error) {
			return client.StorageV1().CSIDrivers().List(ctx, metav1.ListOptions{})
		}},
	}
	for _, l := range lists {
		list, err := l.list()
		if err != nil {
			continue // not readable by this user: the filters see none
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		if err := add(l.store, objs); err != nil {
			return nil, err
		}
	}
	return kubefilter.New(ctx, factory, client)
}
