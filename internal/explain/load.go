package explain

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/clock"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/kubefilter"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// state is what explain decides from: the scheduler's cycle state
// (cycle.Watch and cycle.State, exactly as the scheduler builds it, on a
// fresh watch of the cluster) and the objects explain reads around it.
type state struct {
	cycle  *cycle.State
	nodes  int
	pods   []*corev1.Pod
	claims []*resourcev1.ResourceClaim
	groups map[string]*lockv1.PodGroup // ns/name
	// composites are the CompositePodGroups (ns/name): victim trees are
	// candidates whole, as the scheduler offers them.
	composites map[string]*lockv1.CompositePodGroup
	pdbs       []*policyv1.PodDisruptionBudget
	// notes say what explain could not see as the scheduler does (e.g.
	// DeviceTaintRules it may not read).
	notes []string
	// clusterQueueOf names the ClusterQueue a Kueue LocalQueue feeds, read
	// from the API server: a unit Kueue holds says whose admission it waits
	// for in the scheduler's words (a user who may not read LocalQueues
	// gets the LocalQueue named, with why).
	clusterQueueOf podgroup.ClusterQueueOf
}

// syncTimeout bounds how long explain waits for its watch of the cluster
// to list everything (a user without list/watch rights would wait for ever).
const syncTimeout = time.Minute

// load watches the cluster as the scheduler does until every informer has
// listed, and rebuilds the nominations the scheduler holds from the pods'
// status.nominatedNodeName. The informers stop with ctx.
func load(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) (*state, error) {
	st := &state{groups: map[string]*lockv1.PodGroup{}, composites: map[string]*lockv1.CompositePodGroup{}}
	st.clusterQueueOf = kueuecheck.ClusterQueueOf(func(ns, name string) (*unstructured.Unstructured, error) {
		return dyn.Resource(kueuecheck.LocalQueueResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	})
	taintRules, note, err := taintRulesReadable(ctx, client)
	if err != nil {
		return nil, err
	}
	if note != "" {
		st.notes = append(st.notes, note)
	}
	f := features.Default()
	c := snapshot.NewCache(time.Minute, f, clock.RealClock{})
	st.cycle = &cycle.State{Cache: c, CEL: dra.NewCache(), Clock: clock.RealClock{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(cachetrim.Transform))
	watched, err := cycle.Watch(ctx, factory, client, c, cycle.WatchOptions{TaintRules: taintRules})
	if err != nil {
		return nil, err
	}
	pods := factory.Core().V1().Pods().Lister()
	claims := factory.Resource().V1().ResourceClaims().Lister()
	nodes := factory.Core().V1().Nodes().Lister()
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return nil, fmt.Errorf("could not list and watch %v within %s: does your user have list and watch on it?", typ, syncTimeout)
		}
	}
	if !toolscache.WaitForCacheSync(syncCtx.Done(), watched.Synced...) {
		return nil, fmt.Errorf("could not read every ResourceSlice within %s", syncTimeout)
	}
	if st.pods, err = pods.List(labels.Everything()); err != nil {
		return nil, err
	}
	if st.claims, err = claims.List(labels.Everything()); err != nil {
		return nil, err
	}
	ns, err := nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	st.nodes = len(ns)
	if pdbs, err := client.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{}); err == nil {
		for i := range pdbs.Items {
			st.pdbs = append(st.pdbs, &pdbs.Items[i])
		}
	}
	if st.cycle.Filters, err = loadFilters(ctx, client); err != nil {
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
	for _, c := range listComposites(ctx, dyn, "") {
		st.composites[c.Namespace+"/"+c.Name] = c
	}
	// Held as the scheduler holds them, for as long as explain looks.
	cycle.RestoreNominations(c, st.pods, st.unitOf, time.Now().Add(24*time.Hour))
	return st, nil
}

// taintRulesReadable reports whether the slices are seen with
// DeviceTaintRules applied, as the scheduler sees them: the API server
// serves them and this user may list them. When it may not, note says so.
func taintRulesReadable(ctx context.Context, client kubernetes.Interface) (bool, string, error) {
	served, err := apidiscovery.Serves(client.Discovery(), "resource.k8s.io/v1", "devicetaintrules")
	if err != nil || !served {
		return false, "", err
	}
	_, err = client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsForbidden(err) {
		return false, "DeviceTaintRules are not readable by this user: devices tainted only by a rule are shown as usable, although the scheduler does not use them", nil
	}
	return err == nil, "", err
}

// snapshot is what the scheduler's cycle for the unit named self, of
// priority prio, sees (cycle.State.Snapshot); each call starts again from
// the cluster as read.
func (st *state) snapshot(ctx context.Context, self string, prio int32) *snapshot.Snapshot {
	return st.cycle.Snapshot(ctx, self, prio)
}

// unitOf is the scheduler's unit of a pod and its priority.
func (st *state) unitOf(p *corev1.Pod) (string, int32) {
	if g := podgroup.GroupOf(p); g != "" {
		prio := corev1helpers.PodPriority(p)
		if pg := st.groups[p.Namespace+"/"+g]; pg != nil {
			prio = st.groupPriority(pg)
		}
		return queue.GroupKey(p.Namespace, g).String(), prio
	}
	return queue.PodKey(p.Namespace, p.Name).String(), corev1helpers.PodPriority(p)
}

func (st *state) claim(ns, name string) *resourcev1.ResourceClaim {
	for _, c := range st.claims {
		if c.Namespace == ns && c.Name == name {
			return c
		}
	}
	return nil
}

func (st *state) pod(ns, name string) *corev1.Pod {
	for _, p := range st.pods {
		if p.Namespace == ns && p.Name == name {
			return p
		}
	}
	return nil
}

// groupPriority is the scheduler's: the members' priority.
func (st *state) groupPriority(pg *lockv1.PodGroup) int32 {
	var members []*corev1.Pod
	for _, p := range st.pods {
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
	add := func(store toolscache.Indexer, objs []runtime.Object) error {
		for _, o := range objs {
			if err := store.Add(o); err != nil {
				return err
			}
		}
		return nil
	}
	lists := []struct {
		store toolscache.Indexer
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
